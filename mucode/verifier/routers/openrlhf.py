"""``POST /openrlhf/reward``: OpenRLHF's remote reward-model protocol, scored by mucode's programs.

OpenRLHF (``--remote_rm_url http://host:8000/openrlhf/reward``) posts ``{"query": [...], "prompts":
[...], "labels": [...]}`` — ``query`` is prompt + response as one string, ``prompts`` the prompts,
``labels`` the data set's label column, any JSON value — and reads ``rewards`` (and ``scores``,
``extra_logs``) back. OpenRLHF (``openrlhf/utils/agent.py``) posts one sample per request, decoded with
``skip_special_tokens=False``: the response ends in the EOS text (```` ```<|im_end|> ````), which is
stripped (``mucode.verifier.samples.strip_special_tokens``) before scoring. ``extra_logs`` holds, per
sample, a 0/1 flag for every status (``status/<name>``, the same keys in every answer: OpenRLHF
concatenates them over samples) and ``correct``; OpenRLHF averages them into its logs.

Each sample becomes a mucode item: the response is ``query`` without its leading ``prompt``; the label
decides the program, by the rules the verl and TRL adapters share (``mucode.verifier.samples.to_item``): JSON
``{"program", "spec"}`` is used as is, JSON with ``tests`` (or verl's ``inputs``/``outputs``) is a code
item, anything else is a math answer. So one OpenRLHF data set may mix math and code.

Deviation from a reward model: when any sample of the request cannot be scored (sandbox or verifier
failure), the whole request is a 503 — OpenRLHF retries it, then stops — instead of a reward of 0
that would be trained on as a wrong answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, status
from pydantic import BaseModel, ConfigDict, Field

from mucode.protocol import Item, Status
from mucode.verifier.deps import Authorized, VerifierDep
from mucode.verifier.routers.verify import score_request
from mucode.verifier.samples import strip_special_tokens, to_item
from mucode.verifier.schemas import ErrorResponse, VerifyRequest

router = APIRouter(tags=["openrlhf"])


class OpenRLHFRequest(BaseModel):
    """What OpenRLHF's remote reward client sends (``metas`` and other extra fields are ignored)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "query": ["What is 1/2 + 1/2?\nIt is \\boxed{1}"],
                    "prompts": ["What is 1/2 + 1/2?\n"],
                    "labels": ["1"],
                }
            ]
        },
    )

    query: list[str] = Field(description="Prompt + response of each sample, as one string.")
    prompts: list[str] = Field(
        default_factory=list, description="The prompt of each sample (stripped from query)."
    )
    labels: list[Any] = Field(
        default_factory=list,
        description="The label column, any JSON value: a math answer "
        "(text or number), a spec dict or its JSON text (code spec, {program, spec}).",
    )


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]] = Field(
        description="Per-sample 0/1 flags OpenRLHF logs: `correct` and `status/<name>` for every status."
    )


def _items(request: OpenRLHFRequest) -> list[Item]:
    n = len(request.query)
    if len(request.prompts) not in (0, n) or len(request.labels) != n:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail=(
                f"query has {n} samples, prompts {len(request.prompts)}, labels {len(request.labels)}: "
                "send one label (and one prompt) per query"
            ),
        )
    items = []
    for i, (query, label) in enumerate(zip(request.query, request.labels, strict=True)):
        prompt = request.prompts[i] if request.prompts else ""
        response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
        try:
            items.append(to_item("openrlhf", strip_special_tokens(response), label, {"index": i}))
        except (ValueError, KeyError, TypeError) as exc:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                detail=(f"label {i} ({str(label)[:80]!r}) is not a math answer or a spec: {exc}"),
            ) from exc
    return items


@router.post(
    "/openrlhf/reward",
    response_model=OpenRLHFResponse,
    dependencies=[Authorized],
    responses={code: {"model": ErrorResponse} for code in (401, 413, 422, 429, 503)},
)
async def openrlhf_reward(
    request: OpenRLHFRequest,
    verifier: VerifierDep,
    x_mucode_timeout_s: Annotated[float | None, Header()] = None,
) -> OpenRLHFResponse:
    """Scores OpenRLHF samples; rewards in the order of ``query``."""
    results = await score_request(VerifyRequest(items=_items(request)), verifier, x_mucode_timeout_s)
    failed = [(i, r) for i, r in enumerate(results) if r.infra]
    if failed:
        i, r = failed[0]
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail=(
                f"{len(failed)} of {len(results)} samples could not be scored (sample {i}: {r.status}: "
                f"{r.error}); retry later — a 0 here would train on it as a wrong answer"
            ),
        )
    rewards = [float(r.reward) for r in results]
    logs = {"correct": [float(r.status is Status.correct) for r in results]}
    logs |= {f"status/{s.value}": [float(r.status is s) for r in results] for s in Status}
    return OpenRLHFResponse(rewards=rewards, scores=rewards, extra_logs=logs)
