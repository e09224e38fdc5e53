"""Open ``graphfix profile --html`` pages in a real headless browser and check them.

    python tools/check_profile_page.py PAGE.html... [--browser chromium] [--screenshot DIR]

For each page the browser loads a copy with one extra script at the end, which runs after the
page's own: it counts the chart's bars and the node tables' rows, clicks the "ms" header of
each node table (twice: descending, then ascending) and checks the rows' order, and writes
what it saw into the document title. The title is read back from the DOM the browser dumps
(``--dump-dom``). Network access is switched off (``--proxy-server`` to a closed port), so a
page that needed the network would show it. Needs a Chromium (Debian: ``apt-get install
chromium``); prints what it checked, exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["check_page", "main"]

_PROBE = """
<script>
(function () {
  var result = {bars: document.querySelectorAll('rect.bar').length, tables: []};
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var header = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var column = header.findIndex(function (th) { return th.textContent === 'ms'; });
    var values = function () {
      return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
        return parseFloat(row.cells[column].dataset.value);
      });
    };
    header[column].click();
    var down = values();
    header[column].click();
    var up = values();
    var sorted = function (list, sign) {
      for (var i = 1; i < list.length; i++) { if (sign * (list[i] - list[i - 1]) < 0) return false; }
      return true;
    };
    result.tables.push({model: table.dataset.model, rows: down.length,
                        descending: sorted(down, -1), ascending: sorted(up, 1)});
  });
  document.title = 'PROBE' + JSON.stringify(result);
})();
</script>
"""


def check_page(page: Path, browser: str, screenshot: Path | None = None) -> dict:
    """What the browser saw on ``page`` (bars, rows, sort orders)."""
    text = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / page.name
        probe.write_text(text.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
                 f"--user-data-dir={folder}/profile"]
        dumped = subprocess.run([browser, *flags, "--dump-dom", probe.as_uri()],
                                capture_output=True, text=True, timeout=120, check=False)
        if screenshot is not None:
            subprocess.run([browser, *flags, "--window-size=1200,2400",
                            f"--screenshot={screenshot / (page.stem + '.png')}",
                            page.resolve().as_uri()],
                           capture_output=True, timeout=120, check=False)
    found = re.search(r"<title>PROBE(.*?)</title>", dumped.stdout, re.S)
    if not found:
        return {"error": f"the probe did not run: {dumped.stderr.strip()[-300:]}"}
    return json.loads(html.unescape(found.group(1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--browser", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--screenshot", type=Path, help="write a screenshot per page here")
    args = parser.parse_args(argv)
    if shutil.which(args.browser) is None:
        print(f"no browser: {args.browser} is not installed (apt-get install chromium)")
        return 1
    failed = False
    for page in args.pages:
        seen = check_page(page, args.browser, args.screenshot)
        ok = "error" not in seen and seen["bars"] > 0 and seen["tables"] and all(
            t["rows"] > 0 and t["descending"] and t["ascending"] for t in seen["tables"])
        failed |= not ok
        print(f"{page}: {'ok' if ok else 'FAILED'} {json.dumps(seen)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
