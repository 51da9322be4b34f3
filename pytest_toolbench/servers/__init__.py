"""The run's model server, apart from the clients that call it (models/): the managed vLLM
process (vllm_server.py), the embedded default model it serves (embedded.py), the owner thread
that starts it on the first request (owner.py) and the run's one prepared server with the facts
its clients get (managed.py). Clients learn of it only through
:class:`~pytest_toolbench.models.spec.ServerInfo` and the rendezvous files of
models/lazy_server.py."""
