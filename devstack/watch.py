"""Print the messages of a topic as they arrive: ``python -m devstack.watch jobs``."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from kafka import KafkaConsumer

from jobrunner.config import Settings


def main() -> None:
    topic = sys.argv[1] if len(sys.argv) > 1 else "jobs"
    consumer = KafkaConsumer(
        topic, bootstrap_servers=Settings.from_env().kafka_bootstrap.split(","),
        auto_offset_reset="latest", enable_auto_commit=False, group_id=None,
    )
    print(f"watching {topic} (Ctrl-C to stop)", flush=True)
    try:
        for message in consumer:
            received = datetime.now(UTC).isoformat(timespec="milliseconds")
            value = json.loads(message.value)
            print(f"{received}  {json.dumps(value)}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
