"""A real S3 endpoint on loopback for tests: moto's server, spoken to over HTTP.

Going through ``endpoint_url`` (instead of patching boto3 in-process) means the
tests exercise botocore's real request signing, headers such as
``If-None-Match`` / ``If-Match``, and error parsing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.server import ThreadedMotoServer

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


def conditional_requests_one_at_a_time(app: WsgiApp) -> WsgiApp:
    """`app` serving requests with `If-Match`/`If-None-Match` one at a time.

    S3 checks a conditional write's precondition and writes atomically, and the manifest's
    compare-and-set rests on that; moto checks, then writes, in whichever request thread
    runs, so two concurrent writes from the same version could both succeed (seen under
    load in `test_concurrent_cas_has_one_winner[s3]`). Serializing them gives the tests the
    atomicity real S3 has; other requests run concurrently as before."""
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if "HTTP_IF_MATCH" in environ or "HTTP_IF_NONE_MATCH" in environ:
            with lock:
                return list(app(environ, start_response))
        return app(environ, start_response)

    return serve


@contextmanager
def moto_s3_server() -> Iterator[str]:
    """Run moto on 127.0.0.1 and yield its endpoint URL, e.g. ``http://127.0.0.1:41234``.

    Port 0 lets the kernel pick a free port at bind time, so parallel test
    runs cannot race for the same port. Clients still need (dummy) AWS
    credentials and a region in their environment.
    """
    werkzeug_log = logging.getLogger("werkzeug")
    previous_level = werkzeug_log.level
    werkzeug_log.setLevel(logging.WARNING)  # one INFO line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = conditional_requests_one_at_a_time(wsgi.app)
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug_log.setLevel(previous_level)
