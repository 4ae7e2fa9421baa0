"""A target parsed from its JSON shape: every rule refuses with the field it names, and ``to_dict`` round-trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrunner.domain.errors import InvalidField
from jobrunner.domain.targets.model import (
    DEFAULT_TIMEOUT_S,
    MAX_HEADER_VALUE,
    MAX_HEADERS,
    HttpsTarget,
    LambdaTarget,
    SqsTarget,
    target_from_dict,
)

ARN = "arn:aws:lambda:eu-west-1:123456789012:function:deliver-me"
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
FIFO = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo"


def refused(value: Any) -> InvalidField:
    with pytest.raises(InvalidField) as caught:
        target_from_dict(value)
    return caught.value


def https(**fields: Any) -> dict[str, Any]:
    return {"https": {"url": "https://hooks.example.com/run", **fields}}


def test_an_https_target_takes_its_defaults() -> None:
    assert target_from_dict({"https": {"url": "https://hooks.example.com/run"}}) == HttpsTarget(
        "https://hooks.example.com/run", "POST", {}, DEFAULT_TIMEOUT_S)


@pytest.mark.parametrize("value", [
    https(method="PUT", headers={"Authorization": "Bearer abc", "X-Team": "payments"}, timeout_s=30),
    {"https": {"url": "https://[2606:4700::1111]:8443/a/b?c=d", "method": "GET", "headers": {}, "timeout_s": 1}},
    {"lambda": {"function_arn": ARN}},
    {"lambda": {"function_arn": ARN + ":$LATEST"}},
    {"lambda": {"function_arn": "arn:aws-cn:lambda:cn-north-1:123456789012:function:f:live"}},
    {"sqs": {"queue_url": QUEUE}},
    {"sqs": {"queue_url": FIFO, "message_group_id": "tenant-7"}},
    {"sqs": {"queue_url": "https://eu-west-1.queue.amazonaws.com/123456789012/legacy"}},
], ids=["https", "https-ipv6-get", "lambda", "lambda-latest", "lambda-china-alias", "sqs", "sqs-fifo", "sqs-legacy"])
def test_to_dict_gives_back_the_shape_parsed(value: dict[str, Any]) -> None:
    target = target_from_dict(value)
    assert target_from_dict(target.to_dict()) == target
    assert target.to_dict() == (value if "https" not in value else {"https": {
        "method": "POST", "headers": {}, "timeout_s": DEFAULT_TIMEOUT_S, **value["https"]}})


def test_a_method_is_read_in_any_case() -> None:
    target = target_from_dict(https(method="patch"))
    assert isinstance(target, HttpsTarget)
    assert target.method == "PATCH"


@pytest.mark.parametrize(("value", "field"), [
    (None, "target"),
    ({}, "target"),
    ({"https": {"url": "https://a.example"}, "sqs": {"queue_url": QUEUE}}, "target"),
    ({"kafka": {}}, "target"),
    ({"https": "https://a.example"}, "target.https"),
    ({"https": {}}, "target.https.url"),
    (https(retries=3), "target.https.retries"),
    ({"lambda": {}}, "target.lambda.function_arn"),
    ({"sqs": {"queue_url": QUEUE, "group": "x"}}, "target.sqs.group"),
])
def test_the_shape_is_exactly_one_kind_with_its_fields(value: Any, field: str) -> None:
    assert refused(value).field == field


@pytest.mark.parametrize(("url", "reason"), [
    ("http://hooks.example.com/run", "https"),
    ("ftp://hooks.example.com/run", "https"),
    ("hooks.example.com/run", "https"),
    ("https:///run", "host"),
    ("https://user:pw@hooks.example.com/run", "user information"),
    ("https://user@hooks.example.com/run", "user information"),
    ("https://hooks.example.com/run#top", "fragment"),
    ("https://hooks.example.com/run#", "fragment"),
    ("https://hooks.example.com:99999/run", "port"),
    ("https://hooks.example.com:/run", "port"),
    ("https://hooks.example.com:abc/run", "port"),
    ("https://hooks example.com/run", "ASCII"),
    ("https://hooks.example.com/r\nun", "ASCII"),
    ("https://hööks.example.com/run", "ASCII"),
    ("https://hooks_.example.com/run", "valid host"),
    ("https://-hooks.example.com/run", "valid host"),
    ("https://" + "a" * 64 + ".example.com/", "valid host"),
    ("https://2130706433/", "four decimal numbers"),
    ("https://0177.0.0.1/", "four decimal numbers"),
    ("https://0x7f.0.0.1/", "four decimal numbers"),
    ("https://127.1/", "four decimal numbers"),
    ("https://1.2.3.256/", "four decimal numbers"),
    ("https://example.0x10/", "four decimal numbers"),
    ("https://[::1%25eth0]/", "zone"),
    ("https://[zz::1]/", "IPv6"),
    ("https://example.com/" + "a" * 2048, "at most"),
    ("", "non-empty"),
])
def test_an_https_url_is_refused_with_its_reason(url: str, reason: str) -> None:
    error = refused(https(url=url))
    assert error.field == "target.https.url"
    assert reason in error.reason


@pytest.mark.parametrize("url", [
    "https://hooks.example.com", "HTTPS://Hooks.Example.COM/Run", "https://hooks.example.com./run",
    "https://xn--hks-qoa.example.com/", "https://203.0.113.9:8443/x?y=%20z", "https://[::1]/",
    "https://localhost/",  # a name: what it resolves to is checked at connect time
])
def test_an_https_url_is_accepted(url: str) -> None:
    assert target_from_dict(https(url=url)) == HttpsTarget(url)


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "CONNECT", "TRACE", "", None, 1])
def test_a_method_outside_the_allowed_set_is_refused(method: Any) -> None:
    assert refused(https(method=method)).field == "target.https.method"


@pytest.mark.parametrize(("headers", "field", "reason"), [
    ([], "target.https.headers", "object"),
    ({"webhook-id": "x"}, "target.https.headers.webhook-id", "set by the delivery"),
    ({"Webhook-Signature": "v1,x"}, "target.https.headers.Webhook-Signature", "set by the delivery"),
    ({"webhook-anything": "x"}, "target.https.headers.webhook-anything", "set by the delivery"),
    ({"Host": "other.example"}, "target.https.headers.Host", "set by the delivery"),
    ({"content-length": "1"}, "target.https.headers.content-length", "set by the delivery"),
    ({"Content-Type": "text/plain"}, "target.https.headers.Content-Type", "set by the delivery"),
    ({"Transfer-Encoding": "chunked"}, "target.https.headers.Transfer-Encoding", "set by the delivery"),
    ({"jobrunner-attempt": "9"}, "target.https.headers.jobrunner-attempt", "set by the delivery"),
    ({"Proxy-Authorization": "x"}, "target.https.headers.Proxy-Authorization", "set by the delivery"),
    ({"X Team": "a"}, "target.https.headers.X Team", "header name"),
    ({"X-Team:": "a"}, "target.https.headers.X-Team:", "header name"),
    ({"": "a"}, "target.https.headers.", "header name"),
    ({"x" * 65: "a"}, "target.https.headers." + "x" * 65, "header name"),
    ({"X-Team": "a", "x-team": "b"}, "target.https.headers.x-team", "twice"),
    ({"X-Team": "a\r\nX-Evil: 1"}, "target.https.headers.X-Team", "visible ASCII"),
    ({"X-Team": ""}, "target.https.headers.X-Team", "visible ASCII"),
    ({"X-Team": " padded"}, "target.https.headers.X-Team", "visible ASCII"),
    ({"X-Team": "é"}, "target.https.headers.X-Team", "visible ASCII"),
    ({"X-Team": 7}, "target.https.headers.X-Team", "visible ASCII"),
    ({"X-Team": "a" * (MAX_HEADER_VALUE + 1)}, "target.https.headers.X-Team", "visible ASCII"),
    ({f"X-H{i}": "a" for i in range(MAX_HEADERS + 1)}, "target.https.headers", "at most"),
    ({f"X-H{i}": "a" * 1000 for i in range(9)}, "target.https.headers", "total"),
])
def test_headers_are_refused_with_the_name_at_fault(headers: Any, field: str, reason: str) -> None:
    error = refused(https(headers=headers))
    assert (error.field, reason in error.reason) == (field, True)


def test_headers_with_inner_spaces_and_token_punctuation_are_accepted() -> None:
    headers = {"Authorization": "Bearer a.b.c", "X-Api_Key!": "k", "Accept": "application/json"}
    assert target_from_dict(https(headers=headers)) == HttpsTarget("https://hooks.example.com/run",
                                                                   headers=headers)


@pytest.mark.parametrize("timeout_s", [0, 31, -1, 10.5, True, "10", None])
def test_a_timeout_outside_1_to_30_whole_seconds_is_refused(timeout_s: Any) -> None:
    assert refused(https(timeout_s=timeout_s)).field == "target.https.timeout_s"


@pytest.mark.parametrize("timeout_s", [1, 30])
def test_the_timeout_bounds_are_inclusive(timeout_s: int) -> None:
    assert target_from_dict(https(timeout_s=timeout_s)) == HttpsTarget("https://hooks.example.com/run",
                                                                       timeout_s=timeout_s)


@pytest.mark.parametrize("arn", [
    "arn:aws:lambda:eu-west-1:123456789012:function",
    "arn:aws:lambda:eu-west-1:12345678901:function:f",  # 11-digit account
    "arn:aws:lambda:eu-west:123456789012:function:f",  # no region number
    "arn:aws:lambda:eu-west-1:123456789012:layer:f",
    "arn:aws:sqs:eu-west-1:123456789012:function:f",
    "arn:aws:lambda:eu-west-1:123456789012:function:f.g",
    "arn:aws:lambda:eu-west-1:123456789012:function:" + "f" * 65,
    "arn:aws:lambda:eu-west-1:123456789012:function:f:",
    "arn:aws:lambda:eu-west-1:123456789012:function:f:a:b",
    "arn:aws:lambda:eu-west-1:123456789012:function:f ",
    "my-function",
    "",
    7,
])
def test_a_malformed_lambda_arn_is_refused(arn: Any) -> None:
    assert refused({"lambda": {"function_arn": arn}}).field == "target.lambda.function_arn"


def test_a_lambda_target_names_its_parts() -> None:
    target = LambdaTarget(ARN + ":7").checked()
    assert (target.region, target.account, target.function_name, target.qualifier) == (
        "eu-west-1", "123456789012", "deliver-me", "7")
    assert LambdaTarget(ARN).qualifier is None


@pytest.mark.parametrize("url", [
    "http://sqs.eu-west-1.amazonaws.com/123456789012/orders",
    "https://sqs.eu-west-1.amazonaws.com/123456789012",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/",
    "https://sqs.eu-west-1.amazonaws.com/12345/orders",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/orders/more",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/or.ders",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/" + "q" * 81,
    "https://sqs.eu-west-1.amazonaws.com.evil.example/123456789012/orders",
    "https://sqs.eu-west-1.evil.example/123456789012/orders",
    "https://localhost:4566/123456789012/orders",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/orders?x=1",
    "",
])
def test_a_malformed_queue_url_is_refused(url: str) -> None:
    assert refused({"sqs": {"queue_url": url}}).field == "target.sqs.queue_url"


def test_a_queue_name_of_80_characters_is_accepted() -> None:
    target = target_from_dict({"sqs": {"queue_url": QUEUE.replace("orders", "q" * 80)}})
    assert isinstance(target, SqsTarget)
    assert (target.region, target.account, target.queue_name) == ("eu-west-1", "123456789012", "q" * 80)


@pytest.mark.parametrize(("value", "reason"), [
    ({"queue_url": FIFO}, "required for a FIFO queue"),
    ({"queue_url": QUEUE, "message_group_id": "g"}, "only for a FIFO queue"),
    ({"queue_url": FIFO, "message_group_id": ""}, "1 to 128"),
    ({"queue_url": FIFO, "message_group_id": "g" * 129}, "1 to 128"),
    ({"queue_url": FIFO, "message_group_id": "a b"}, "1 to 128"),
    ({"queue_url": FIFO, "message_group_id": 7}, "1 to 128"),
])
def test_a_message_group_id_goes_with_a_fifo_queue_only(value: dict[str, Any], reason: str) -> None:
    error = refused({"sqs": value})
    assert (error.field, reason in error.reason) == ("target.sqs.message_group_id", True)


@given(st.dictionaries(st.from_regex(r"X-[A-Za-z0-9-]{1,20}", fullmatch=True),
                       st.from_regex(r"[!-~]([ -~]{0,30}[!-~])?", fullmatch=True), max_size=MAX_HEADERS),
       st.sampled_from(["POST", "PUT", "PATCH", "GET", "DELETE"]), st.integers(1, 30))
def test_any_valid_https_target_round_trips(headers: dict[str, str], method: str, timeout_s: int) -> None:
    lowered = {name.lower() for name in headers}
    if len(lowered) < len(headers):  # names differing only in case are refused: covered above
        return
    target = HttpsTarget("https://hooks.example.com/run", method, headers, timeout_s).checked()
    assert target_from_dict(target.to_dict()) == target
