"""The client: streamed requests timed per chunk, the stream transports (lean SSE over HTTP/1.1 and the httpx
reference), the ways of offering load (`load/`), and client shards in worker processes.
"""
