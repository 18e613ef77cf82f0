"""Chat without a screen: the backend interface, the in-process engine and OpenAI-compatible
endpoint backends, one reply's driver, and the session state."""
