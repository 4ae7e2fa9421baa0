"""``jobrunner tail``: follow a Kafka topic as a table, or as JSON lines.

Typer reads the parameter annotations at run time: no ``from __future__ import annotations`` here.
"""

from typing import Annotated

import typer

from jobrunner_client.cli import columns
from jobrunner_client.cli.arguments import OutputOption
from jobrunner_client.cli.session import EXIT_API, EXIT_CONNECT, EXIT_NOT_FOUND, current, reports_errors
from jobrunner_client.cli.tail import KafkaUnreachable, TailRecord, TopicMissing, follow


@reports_errors
def tail(
    topic: Annotated[str, typer.Argument(help="jobs, job-results, job-dlq or an allowed topic")] = "jobs",
    count: Annotated[int | None, typer.Option(help="stop after this many messages", min=1)] = None,
    timeout: Annotated[float | None, typer.Option(help="stop after this many seconds", min=0)] = None,
    job: Annotated[str | None, typer.Option("--job", help="only this job's messages")] = None,
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="read the topic from its start")] = False,
    bootstrap: Annotated[str | None, typer.Option(help="Kafka bootstrap servers [env: KAFKA_BOOTSTRAP]",
                                                  show_default=False)] = None,
    output: OutputOption = None,
) -> None:
    """Follow a Kafka topic as a table (or JSON lines with -o json), from now on."""
    from kafka.errors import KafkaError

    session = current()
    connection = session.connection()
    servers = bootstrap or connection.kafka_bootstrap
    out = session.out(output)
    shown = 0

    def show_record(record: TailRecord) -> None:
        nonlocal shown
        if out.json:
            out.line(record.to_dict())
        else:
            if shown == 0:
                out.show(columns.header(), one_line=True)
            out.show(columns.row(record), one_line=True)
        shown += 1

    if not out.json:
        limits = [f"{count} message(s)" if count else "", f"{timeout:g} s" if timeout is not None else ""]
        bound = " or ".join(x for x in limits if x) or "Ctrl-C"
        out.note(f"following {topic} on {servers} until {bound}")
    try:
        seen = follow(session.deps.consumer(servers, connection.kafka_security), topic, show_record, count=count,
                      timeout_s=timeout, from_beginning=from_beginning, job_id=job)
    except KafkaUnreachable:
        out.error(f"cannot connect to Kafka at {servers}", None,
                  {"status": 0, "error": "cannot_connect", "message": f"no Kafka broker at {servers}"})
        raise typer.Exit(EXIT_CONNECT) from None
    except TopicMissing as exc:
        out.error(str(exc), None, {"status": 0, "error": "no_topic", "message": str(exc)})
        raise typer.Exit(EXIT_NOT_FOUND) from None
    except KafkaError as exc:
        out.error(f"Kafka: {exc}", None, {"status": 0, "error": "kafka", "message": str(exc)})
        raise typer.Exit(EXIT_API) from None
    except KeyboardInterrupt:
        return
    if count is not None and seen < count:
        out.error(f"timed out after {timeout:g} s with {seen} of {count} message(s)", None,
                  {"status": 0, "error": "timeout", "message": f"{seen} of {count} messages"})
        raise typer.Exit(EXIT_API)
