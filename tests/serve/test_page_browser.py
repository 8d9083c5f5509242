"""The page at ``/`` in a real headless browser (Debian's chromium + chromedriver, via selenium).

Skipped when selenium, chromium or chromedriver is not installed. Screenshots go to the test's
temporary folder, and to ``$BERTKIT_SCREENSHOTS`` when set (``docs/images`` refreshes the docs').
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("uvicorn")

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402

from ..task_models import make_task_model  # noqa: E402
from .server import running  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium/chromedriver installed")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1000,1300"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def shot(browser, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"page-{name}.png"
    browser.save_screenshot(str(path))
    assert path.read_bytes()[:4] == b"\x89PNG"
    target = os.environ.get("BERTKIT_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


def open_page(browser, url):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url + "/")
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")
    return wait


def fill(browser, name, text):
    from selenium.webdriver.common.by import By

    element = browser.find_element(By.ID, "f-" + name)
    element.clear()
    element.send_keys(text)


def test_classifier_page_labels_latency_attention_and_stale_state(tmp_path, browser):
    from selenium.webdriver.common.by import By

    directory = make_task_model(tmp_path, "classify")
    text = "the man went to the store ."
    expected = load(directory).predict(text)
    with running(create_app(ServeConfig(model=str(directory)))) as url:
        wait = open_page(browser, url)
        assert "labels negative, positive, neutral" in browser.find_element(By.ID, "info").text
        fill(browser, "text", text)
        browser.find_element(By.ID, "predict").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .label"))
        labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .label")]
        assert labels == [a["label"] for a in expected]
        assert "ms in all" in browser.find_element(By.ID, "meta").text  # latency shown
        browser.find_element(By.ID, "show").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('heat').width") > 100)
        assert browser.find_element(By.ID, "legend").is_displayed()  # the colour scale
        shot(browser, tmp_path, "classify")
        fill(browser, "text", "he is good")  # a new text: the old answer and map go
        assert browser.find_element(By.ID, "result").text == ""
        assert not browser.find_element(By.ID, "heat").is_displayed()
        assert not browser.find_element(By.ID, "legend").is_displayed()
        fill(browser, "text", " ".join(["the"] * 100))  # longer than 64 tokens
        browser.find_element(By.ID, "predict").click()
        wait.until(lambda d: "truncated" in d.find_element(By.ID, "meta").text)
        browser.find_element(By.ID, "f-text").clear()
        browser.find_element(By.ID, "predict").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .error"))
        assert "empty" in browser.find_element(By.CSS_SELECTOR, "#result .error").text
        assert browser.find_element(By.ID, "meta").text == ""


def test_ner_and_qa_answers_are_highlighted_and_pairs_mapped_whole(tmp_path, browser):
    from selenium.webdriver.common.by import By

    tagger, qa, pair = (make_task_model(tmp_path, k) for k in ("tagging", "qa", "pair"))
    text = "hello world , the man went to the cafe !"
    entities = load(tagger).predict(text)
    with running(create_app(ServeConfig(model=str(tagger)))) as url:
        wait = open_page(browser, url)
        fill(browser, "text", text)
        browser.find_element(By.ID, "predict").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result mark.entity") or "no entities" in
                   d.find_element(By.ID, "result").text)
        marks = browser.find_elements(By.CSS_SELECTOR, "#result mark.entity")
        assert [m.text.rsplit("\n", 1)[0].replace(m.find_element(By.TAG_NAME, "small").text, "").strip()
                for m in marks] == [e["word"] for e in entities]
        shot(browser, tmp_path, "ner")
    question, context = "who went ?", "the man went to the store ."
    answer = load(qa).predict({"question": question, "context": context})
    with running(create_app(ServeConfig(model=str(qa)))) as url:
        wait = open_page(browser, url)
        fill(browser, "question", question)
        fill(browser, "context", context)
        browser.find_element(By.ID, "predict").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .label"))
        if answer["answer"]:
            assert browser.find_element(By.CSS_SELECTOR, "#result mark.answer-span").text == answer["answer"]
        browser.find_element(By.ID, "show").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('heat').width") > 100)
        shot(browser, tmp_path, "qa")
    with running(create_app(ServeConfig(model=str(pair)))) as url:
        wait = open_page(browser, url)
        fill(browser, "text", "the man went")
        fill(browser, "pair", "he is good")
        browser.find_element(By.ID, "show").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('heat').width") > 100)
        tokens = browser.execute_script(
            "return fetch('/attention', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            "body: JSON.stringify({inputs: 'the man went', pair: 'he is good'})}).then(r => r.json())"
            ".then(d => d.tokens)")
        assert tokens == ["[CLS]", "the", "man", "went", "[SEP]", "he", "is", "good", "[SEP]"]
        size = browser.execute_script("return document.getElementById('heat').width")
        assert size >= 90 + 9 * 8  # the map has a row and a column per token of both texts
        shot(browser, tmp_path, "pair-attention")
