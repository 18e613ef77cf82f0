"""ascend-console: a headless layer (this package, no textual) and its Textual UI
(`console.ui`)."""
