"""Opening a page of the HTML report in the headless browser (the ``browser`` fixture of tests/conftest.py), with
what went wrong while it loaded: a module of its own so the report's and the demo's tests share it."""


def visit(browser, url: str):
    """Open ``url``; returns (page, console errors, failed requests)."""
    page = browser.new_page()
    errors, failed = [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda request: failed.append(request.url))
    response = page.goto(url, wait_until="load")
    assert response is None or response.ok, url
    return page, errors, failed
