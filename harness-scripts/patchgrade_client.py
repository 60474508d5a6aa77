"""A client of `patchgrade serve` (docs/serve.md), standard library only.

    from patchgrade_client import Client
    client = Client("http://127.0.0.1:8787", token=None)
    reward = client.grade("astropy__astropy-12907", patch).resolved

`submit` returns at once with the evaluation (its `id`); `wait` long-polls
until it ends; `grade` is both; `grade_many` submits a list in one request
and waits for all. A full queue (429) is retried after its Retry-After.
"""

import json
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Client", "Result", "PatchgradeError"]


class PatchgradeError(Exception):
    """The service refused a request: `status` (HTTP) and its message."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Result:
    """One evaluation as the service reports it.

    `resolved` is True only for a resolved outcome. `environment_failure`
    is True when the outcome (environment_build_failed, infra_error) says
    nothing about the patch: a reward loop should not count it. A patch the
    service refused as unreadable (422) has outcome "rejected" and
    `resolved` False. `record` is the run folder's patchgrade.json.
    """

    def __init__(self, data):
        self.data = data
        self.id = data.get("id")
        self.state = data.get("state")
        self.outcome = data.get("outcome")
        self.resolved = bool(data.get("resolved"))
        self.environment_failure = bool(data.get("environment_failure"))
        self.record = data.get("record")
        self.error = data.get("error")

    @property
    def finished(self):
        return self.state in ("finished", "cancelled", "rejected")

    def __repr__(self):
        return f"Result(id={self.id!r}, state={self.state!r}, outcome={self.outcome!r})"


def _item(instance_id, patch, model=None, sample_id=None):
    item = {"instance_id": instance_id, "model_patch": patch}
    if model is not None:
        item["model_name_or_path"] = model
    if sample_id is not None:
        item["sample_id"] = sample_id
    return item


class Client:
    def __init__(self, url, token=None, timeout=60.0, max_retries=100):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries

    def _request(self, method, path, body=None, timeout=None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        for _ in range(self.max_retries):
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                text = e.read().decode(errors="replace")
                try:
                    message = json.loads(text).get("error", text)
                except ValueError:
                    message = text
                if e.code in (429, 503) and e.headers.get("Retry-After"):
                    time.sleep(float(e.headers["Retry-After"]))
                    continue
                raise PatchgradeError(e.code, message) from None
        raise PatchgradeError(429, f"still refused after {self.max_retries} tries")

    def submit(self, instance_id, patch, model=None, sample_id=None):
        """Submit one evaluation; the same submission again is the same evaluation."""
        return Result(self._request("POST", "/v1/evaluations", _item(instance_id, patch, model, sample_id)))

    def submit_many(self, items):
        """Submit (instance_id, patch) pairs or dicts in one request."""
        body = [it if isinstance(it, dict) else _item(*it) for it in items]
        out = self._request("POST", "/v1/evaluations", {"evaluations": body})
        return [Result(e) for e in out["evaluations"]]

    def get(self, evaluation_id):
        return Result(self._request("GET", f"/v1/evaluations/{evaluation_id}"))

    def list(self, state=None, page=1000):
        """Every evaluation (in `state`: queued, running, finished, cancelled), oldest first, read a page at a time."""
        after = None
        while True:
            q = {"limit": page}
            if state:
                q["state"] = state
            if after:
                q["after"] = after
            out = self._request("GET", "/v1/evaluations?" + urllib.parse.urlencode(q))
            for e in out["evaluations"]:
                yield Result(e)
            after = out.get("next")
            if not after:
                return

    def cancel(self, evaluation_id):
        return Result(self._request("DELETE", f"/v1/evaluations/{evaluation_id}"))

    def wait(self, evaluation, timeout=None, poll=30.0):
        """Wait until it ends (at most `timeout` seconds; None: no limit)."""
        eid = evaluation.id if isinstance(evaluation, Result) else evaluation
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            r = Result(self._request("GET", f"/v1/evaluations/{eid}/wait?timeout={left:.3f}", timeout=left + 30))
            if r.finished or (deadline is not None and time.monotonic() >= deadline):
                return r

    def grade(self, instance_id, patch, model=None, sample_id=None, timeout=None):
        """Submit and wait: a Result with `.resolved`."""
        try:
            r = self.submit(instance_id, patch, model, sample_id)
        except PatchgradeError as e:
            if e.status == 422:
                return Result({"state": "rejected", "outcome": "rejected", "resolved": False, "error": e.message})
            raise
        return self.wait(r, timeout=timeout)

    def grade_many(self, items, timeout=None):
        """Grade (instance_id, patch) pairs or dicts: Results in the same order."""
        return [self.wait(r, timeout=timeout) for r in self.submit_many(items)]
