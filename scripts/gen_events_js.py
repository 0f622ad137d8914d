"""Write src/crag/server/static/events.js from crag.event_names: the web UI's table of event names.

The UI's scripts compare with ``EVENT.<NAME>`` and ``REJECTED.<REASON>``, never with a raw
string; tests/test_event_names.py fails when the file and the module disagree.

python scripts/gen_events_js.py
"""

from __future__ import annotations

from pathlib import Path

from crag.event_names import js_table

TABLE = Path(__file__).resolve().parents[1] / "src" / "crag" / "server" / "static" / "events.js"


def main() -> None:
    TABLE.write_text(js_table(), "utf-8")
    print(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
