"""The shared SDK process (server.py), how pytest starts it (launcher.py), the client that calls
it (client.py) and their wire format (protocol.py). Empty on purpose: the launcher is imported at
pytest start-up and must not pull in the SDK."""
