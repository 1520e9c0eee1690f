"""Batch jobs on the real server (--jobs-db): OpenAI's Files and Batches APIs through the
`openai` SDK, the lines run by the engine at the lowest priority, the job in SQLite.

A 500-line job (120 under the sanitizers, several times slower: the release run does the whole)
completes with one result per line in the input's order and ids; invalid lines go
to the error file with their reason; a cancel stops a job mid-way with the results it has; a
server killed with SIGKILL mid-job and started again on the same database finishes the job with
every line exactly once.
"""
import json
import time

import grpc
import openai
import pytest

from strata_server import BATCH_INVARIANT, Server, jobs_pb, jobs_pb_grpc, sanitized

MODEL = "gemma-3-270m-q4_k_m"
# Lines of the long job and of the job killed mid-way.
LONG_JOB = 120 if sanitized() else 500
KILLED_JOB = 100 if sanitized() else 200


def chat_line(custom_id, prompt, max_tokens=2):
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": MODEL, "max_tokens": max_tokens, "temperature": 0,
                     "messages": [{"role": "user", "content": prompt}]}}


def jsonl(lines):
    return "".join((json.dumps(x) if not isinstance(x, str) else x) + "\n" for x in lines).encode()


def client_for(server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.http_port}/v1", api_key="unused",
                         max_retries=0)


def submit(client, lines, endpoint="/v1/chat/completions", metadata=None):
    file = client.files.create(file=("input.jsonl", jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=file.id, endpoint=endpoint,
                                 completion_window="24h", metadata=metadata)


def wait_for(client, batch_id, states, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in states:
            return batch
        time.sleep(0.2)
    raise AssertionError(f"batch {batch_id} never reached {states}: {batch}")


def wait_completed(client, batch_id, lines, timeout=120):
    """Waits until at least `lines` lines of the job have a result."""
    deadline = time.monotonic() + timeout
    while client.batches.retrieve(batch_id).request_counts.completed < lines:
        assert time.monotonic() < deadline, f"batch {batch_id} did not reach {lines} lines"
        time.sleep(0.1)


def results(client, file_id):
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("jobs") / "jobs.db"
    # Batch lines run batched and are compared with the same request made alone.
    s = Server("--jobs-db", str(db), "--max-model-len", "2048", *BATCH_INVARIANT)
    s.wait_serving()
    yield s
    assert s.stop() == 0, s.log()


def test_a_long_job_completes_in_order_with_matching_ids(server):
    with client_for(server) as client:
        lines = [chat_line(f"req-{i}", f"Say the number {i}.") for i in range(LONG_JOB)]
        batch = submit(client, lines, metadata={"purpose": "test"})
        assert batch.status == "in_progress" and batch.request_counts.total == LONG_JOB
        assert batch.metadata == {"purpose": "test"}
        done = wait_for(client, batch.id, {"completed", "failed", "cancelled", "expired"})
        assert done.status == "completed", done
        assert (done.request_counts.completed, done.request_counts.failed) == (LONG_JOB, 0)
        assert done.error_file_id is None
        out = results(client, done.output_file_id)
        assert [r["custom_id"] for r in out] == [f"req-{i}" for i in range(LONG_JOB)]
        assert all(r["response"]["status_code"] == 200 and r["error"] is None for r in out)
        assert len({r["id"] for r in out}) == LONG_JOB
        # A line's answer is the endpoint's answer.
        direct = client.chat.completions.create(**lines[7]["body"])
        body = out[7]["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == direct.choices[0].message.content
        assert body["usage"]["completion_tokens"] == 2
        listed = client.batches.list(limit=5)
        assert done.id in [b.id for b in listed.data]
    assert server.wait_metric(
        lambda s: s.metric("strata_batch_jobs", 'state="completed"') >= 1)
    assert server.metric("strata_batch_lines_total", 'result="completed"') >= LONG_JOB


def test_invalid_lines_go_to_the_error_file_and_the_rest_run(server):
    lines = [chat_line("good-1", "Hi"),
             "this is not json",
             chat_line("good-1", "a repeated custom_id"),
             {**chat_line("bad-url", "Hi"), "url": "/v1/completions"},
             {**chat_line("bad-body", "Hi"), "body": {"model": MODEL, "messages": "nope"}},
             {**chat_line("bad-model", "Hi"), "body": {"model": "gpt-9", "messages": []}},
             chat_line("good-2", "Hello")]
    with client_for(server) as client:
        batch = submit(client, lines)
        assert batch.request_counts.total == 7 and batch.request_counts.failed == 5
        done = wait_for(client, batch.id, {"completed"})
        assert (done.request_counts.completed, done.request_counts.failed) == (2, 5)
        assert [r["custom_id"] for r in results(client, done.output_file_id)] == [
            "good-1", "good-2"]
        errors = results(client, done.error_file_id)
        assert [r["custom_id"] for r in errors] == [None, "good-1", "bad-url", "bad-body",
                                                     "bad-model"]
        messages = [r["error"]["message"] for r in errors]
        assert "line 2: not valid JSON" in messages[0]
        assert "used by an earlier line" in messages[1]
        assert "url must be" in messages[2]
        assert "messages" in messages[3]
        assert "gpt-9" in messages[4]


def test_requests_for_jobs_are_checked(server):
    with client_for(server) as client:
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_nope")
        with pytest.raises(openai.NotFoundError):
            client.files.content("file-nope")
        file = client.files.create(file=("in.jsonl", jsonl([chat_line("a", "x")])),
                                   purpose="batch")
        with pytest.raises(openai.BadRequestError) as e:
            client.batches.create(input_file_id=file.id, endpoint="/v1/images",
                                  completion_window="24h")
        assert "endpoint" in str(e.value)
        with pytest.raises(openai.BadRequestError):
            client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="1h")
        with pytest.raises(openai.BadRequestError) as e:
            client.files.create(file=("in.jsonl", b"{}\n"), purpose="fine-tune")
        assert "purpose" in str(e.value)
        empty = client.files.create(file=("empty.jsonl", b"\n"), purpose="batch")
        with pytest.raises(openai.BadRequestError) as e:
            client.batches.create(input_file_id=empty.id, endpoint="/v1/chat/completions",
                                  completion_window="24h")
        assert "no request line" in str(e.value)


def test_the_same_jobs_over_grpc(server):
    jobs = jobs_pb_grpc.JobsStub(server.channel)
    lines = [chat_line(f"g-{i}", f"Say {i}.") for i in range(5)] + ["not json"]
    file = jobs.UploadFile(jobs_pb.UploadFileRequest(purpose="batch", filename="g.jsonl",
                                                     content=jsonl(lines)), timeout=30)
    assert file.id.startswith("file-") and file.bytes == len(jsonl(lines))
    batch = jobs.CreateBatch(jobs_pb.CreateBatchRequest(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h",
        metadata={"team": "search"}), timeout=30)
    assert batch.status == "in_progress" and batch.metadata["team"] == "search"
    assert (batch.request_counts.total, batch.request_counts.failed) == (6, 1)
    deadline = time.monotonic() + 120
    while (batch := jobs.GetBatch(jobs_pb.BatchId(id=batch.id), timeout=30)).status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    out = jobs.GetFileContent(jobs_pb.JobFileId(id=batch.output_file_id), timeout=30).content
    assert [json.loads(x)["custom_id"] for x in out.decode().splitlines()] == [
        f"g-{i}" for i in range(5)]
    # The HTTP API sees the same job.
    with client_for(server) as client:
        assert client.batches.retrieve(batch.id).output_file_id == batch.output_file_id
    listed = jobs.ListBatches(jobs_pb.ListBatchesRequest(limit=1), timeout=30)
    assert len(listed.data) == 1 and listed.has_more
    for call, request, code in [
            (jobs.GetBatch, jobs_pb.BatchId(id="batch_nope"), grpc.StatusCode.NOT_FOUND),
            (jobs.UploadFile, jobs_pb.UploadFileRequest(purpose="x", content=b"{}"),
             grpc.StatusCode.INVALID_ARGUMENT),
            (jobs.ListBatches, jobs_pb.ListBatchesRequest(limit=101),
             grpc.StatusCode.INVALID_ARGUMENT),
            (jobs.CreateBatch, jobs_pb.CreateBatchRequest(input_file_id=file.id,
                                                          endpoint="/v1/chat/completions",
                                                          completion_window="7d"),
             grpc.StatusCode.INVALID_ARGUMENT)]:
        with pytest.raises(grpc.RpcError) as e:
            call(request, timeout=30)
        assert e.value.code() == code, (request, e.value.details())


def test_cancel_stops_a_job_with_the_results_it_has(server):
    with client_for(server) as client:
        lines = [chat_line(f"c-{i}", f"Write a long story number {i}.", max_tokens=24)
                 for i in range(300)]
        batch = submit(client, lines)
        wait_completed(client, batch.id, 3)
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status in ("cancelling", "cancelled")
        done = wait_for(client, batch.id, {"cancelled"}, timeout=60)
        assert done.cancelled_at is not None
        assert 3 <= done.request_counts.completed < 300
        out = results(client, done.output_file_id)
        assert len(out) == done.request_counts.completed
        assert len({r["custom_id"] for r in out}) == len(out)
        # Nothing runs for it any more.
        time.sleep(1)
        assert client.batches.retrieve(batch.id).request_counts.completed == len(out)


def test_a_job_survives_sigkill_and_every_line_is_recorded_once(tmp_path):
    db = tmp_path / "jobs.db"
    first = Server("--jobs-db", str(db))
    try:
        first.wait_serving()
        with client_for(first) as client:
            lines = [chat_line(f"k-{i}", f"Name a colour, {i}.", max_tokens=3)
                     for i in range(KILLED_JOB)]
            batch = submit(client, lines)
            wait_completed(client, batch.id, 20)
        first.proc.kill()
        first.proc.wait()
    finally:
        first.stop()
    second = Server("--jobs-db", str(db))
    try:
        second.wait_serving()
        with client_for(second) as client:
            done = wait_for(client, batch.id, {"completed"})
            assert (done.request_counts.completed, done.request_counts.failed) == (KILLED_JOB, 0)
            out = results(client, done.output_file_id)
            assert [r["custom_id"] for r in out] == [f"k-{i}" for i in range(KILLED_JOB)]
    finally:
        assert second.stop() == 0, second.log()
