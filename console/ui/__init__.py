"""The Textual UI of the console: the app, its controllers, widgets and screens.

Everything textual lives here; the rest of `console` is the headless layer it renders
(chat sessions and backends, telemetry sources, alert rules, recordings).
"""
