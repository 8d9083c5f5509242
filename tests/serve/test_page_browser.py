"""The page at ``/`` in a real headless browser (Debian's chromium + chromedriver, via selenium).

Skipped when selenium, chromium or chromedriver is not installed.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
uvicorn = pytest.importorskip("uvicorn")

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium/chromedriver installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """A real uvicorn server on loopback with a tiny classifier; yields (url, model dir)."""
    directory = make_task_model(tmp_path, "classify")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(ServeConfig(model=str(directory))), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the server did not start"
    yield f"http://127.0.0.1:{port}", directory
    server.should_exit = True
    thread.join(30)


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1000,1100"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_page_predicts_and_draws_attention(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, directory = served
    text = "the man went to the store ."
    expected = load(directory).predict(text)
    browser.get(url + "/")
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")
    assert "text-classification" in browser.find_element(By.ID, "info").text
    browser.find_element(By.ID, "f-text").send_keys(text)
    browser.find_element(By.ID, "predict").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .label"))
    labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .label")]
    assert labels == [a["label"] for a in expected]
    browser.find_element(By.ID, "show").click()
    wait.until(lambda d: d.execute_script("return document.getElementById('heat').width") > 100)
    browser.save_screenshot(str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").read_bytes()[:4] == b"\x89PNG"
    # an error shows on the page, the server lives on
    browser.find_element(By.ID, "f-text").clear()
    browser.find_element(By.ID, "predict").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .error"))
    assert "empty" in browser.find_element(By.CSS_SELECTOR, "#result .error").text
