"""A real S3 endpoint on loopback for tests: moto's server, spoken to over HTTP.

Going through ``endpoint_url`` (instead of patching boto3 in-process) means the
tests exercise botocore's real request signing, headers such as
``If-None-Match`` / ``If-Match``, and error parsing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer


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
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug_log.setLevel(previous_level)
