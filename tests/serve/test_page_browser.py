"""The page at ``/`` in a real headless browser (Debian's chromium + chromedriver, via selenium).

``make test`` installs chromium and chromium-driver first (``.ci/install-browser``: apt-get, as
root, once per machine); where it cannot, these tests skip and say how to install them.
Screenshots go to the test's temporary folder, and to ``$BERTKIT_SCREENSHOTS`` when set
(``docs/images`` refreshes the docs'). Every wait is on a condition, with a generous limit
(:data:`WAIT`): a busy 2-core machine starts chromium and answers slowly, never wrongly.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
pytest.importorskip("uvicorn")

from bertkit.inference import load  # noqa: E402
from bertkit.serve import ServeConfig, create_app  # noqa: E402
from bertkit.serve.config import API_KEY_ENV  # noqa: E402

from ..task_models import make_task_model  # noqa: E402
from .server import running  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no chromium/chromedriver installed: `make test` installs them where it runs as root "
           "(.ci/install-browser); else run `apt-get install chromium chromium-driver` as root")
WAIT = 120  # seconds: the limit of every wait on the page, never a sleep



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
    driver.set_page_load_timeout(WAIT)
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


def waiter(browser):
    """A wait of :data:`WAIT` seconds that retries through the page re-rendering what it reads."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))


def open_page(browser, url):
    browser.get(url + "/")
    wait = waiter(browser)
    wait.until(ready)
    return wait


def ready(driver) -> bool:
    return driver.execute_script("return document.body.dataset.ready") == "1"


def heat_drawn(driver) -> bool:
    """The heat map is on screen (not a hidden canvas left from an earlier map)."""
    return driver.execute_script("const c = document.getElementById('heat'); return !c.hidden && c.width > 100")


def errors(driver) -> list[str]:
    """The page's visible error messages (read in one script: never a stale element)."""
    return driver.execute_script("return [...document.querySelectorAll('.error')]"
                                 ".filter((e) => e.offsetParent !== null && e.textContent)"
                                 ".map((e) => e.textContent)")


# where the page takes an API key: a password field (the key is a secret), or one with this id
KEY_FIELD = "input[type=password], #api-key"


def key_fields(driver) -> list:
    from selenium.webdriver.common.by import By

    return [e for e in driver.find_elements(By.CSS_SELECTOR, KEY_FIELD) if e.is_displayed()]


def give_key(driver, key: str) -> None:
    """Type ``key`` in the page's key field and press Enter, then wait for the page's answer to
    it: ready, or an error shown anew (a new element or a new text; an error already on screen
    is no answer)."""
    from selenium.webdriver.common.keys import Keys

    before = errors(driver)
    driver.execute_script("document.querySelectorAll('.error').forEach((e) => { e.dataset.seen = '1'; })")
    field = key_fields(driver)[0]
    field.clear()
    field.send_keys(key + Keys.ENTER)
    waiter(driver).until(lambda d: ready(d) or errors(d) != before or d.execute_script(
        "return [...document.querySelectorAll('.error')].some((e) => e.offsetParent !== null && "
        "e.textContent && !e.dataset.seen)"))


def predicted_labels(browser, wait) -> list[str]:
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, "predict").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .label") or errors(d))
    assert not errors(browser), errors(browser)
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .label")]


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
        assert not key_fields(browser)  # an open server: the page asks for no key
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
        ask(browser, wait, question, context, answer)
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


# ---------------------------------------------------------------- a server with an API key
@pytest.mark.parametrize("given", ["--api-key", "$" + API_KEY_ENV])
def test_the_page_asks_for_the_api_key_then_works(tmp_path, browser, monkeypatch, given):
    """With ``--api-key`` (or ``$BERTKIT_API_KEY``) the page itself stays open but ``/info``,
    ``/predict`` and ``/attention`` answer 401 without the key: the page must ask for it (a
    password field, the key typed and Enter), say when it is refused, and then work."""
    from selenium.webdriver.common.by import By

    key = "page-test-key-0123456789"
    directory = make_task_model(tmp_path, "classify")
    text = "the man went to the store ."
    expected = [a["label"] for a in load(directory).predict(text)]
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    if given == "--api-key":
        config = ServeConfig(model=str(directory), api_key=key)
    else:
        monkeypatch.setenv(API_KEY_ENV, key)
        config = ServeConfig(model=str(directory))
    with running(create_app(config)) as url:
        browser.get(url + "/")
        wait = waiter(browser)
        # the page's first move ends in a key field, an error or (wrongly) a page ready without it
        wait.until(lambda d: key_fields(d) or errors(d) or ready(d))
        assert key_fields(browser), (f"the page offers no field for the API key ({KEY_FIELD}); it "
                                     f"shows: {browser.find_element(By.TAG_NAME, 'body').text[:400]!r}")
        give_key(browser, "not-the-key")
        assert not ready(browser)
        assert any("key" in e.lower() for e in errors(browser)), errors(browser)  # says why
        give_key(browser, key)
        assert ready(browser), f"the page did not load with the right key: {errors(browser)}"
        assert "labels negative, positive, neutral" in browser.find_element(By.ID, "info").text
        fill(browser, "text", text)
        assert predicted_labels(browser, wait) == expected
        browser.find_element(By.ID, "show").click()  # /attention needs the key too
        wait.until(lambda d: heat_drawn(d) or errors(d))
        assert not errors(browser), errors(browser)
        assert key not in browser.current_url  # never in the address (history, logs, Referer)
        shot(browser, tmp_path, "api-key")


def test_docs_let_the_user_authorize_with_an_api_key(tmp_path, browser):
    """``/docs`` (Swagger UI) with ``--api-key``: an Authorize button, from the spec's bearer
    security scheme, so "Try it out" can send the key."""
    from selenium.webdriver.common.by import By

    directory = make_task_model(tmp_path, "classify")
    with running(create_app(ServeConfig(model=str(directory), api_key="docs-test-key"))) as url:
        browser.get(url + "/docs")
        wait = waiter(browser)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"),
                   message="Swagger UI did not render the routes")
        assert browser.find_elements(By.CSS_SELECTOR, "button.authorize"), \
            "/docs has no Authorize button: the spec declares no security scheme for the key"


# ---------------------------------------------------------------- texts longer than the limit
LONG = " ".join(["the man went to the store , he is good ."] * 12)  # 120 words > 64 tokens


def heat_note_after_show(browser, wait) -> str:
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, "show").click()
    wait.until(lambda d: heat_drawn(d) or errors(d))
    assert not errors(browser), f"the heat map of a long text failed: {errors(browser)}"
    return browser.find_element(By.ID, "heat-note").text


@pytest.mark.parametrize("long_text", [{}, {"long_text": "window", "stride": 20}],
                         ids=["truncate", "window"])
def test_a_long_text_answers_and_maps_with_the_limit_stated(tmp_path, browser, long_text):
    """A text longer than the model's 64 tokens: the answer says it was truncated (or read in
    windows, with ``--long-text window``), and "Show heat map" draws the map of its first 64
    tokens with the truncation stated, as ``bertkit attention`` does, instead of replacing the
    answer with an error."""
    from selenium.webdriver.common.by import By

    directory = make_task_model(tmp_path, "classify")
    with running(create_app(ServeConfig(model=str(directory), long_text=long_text))) as url:
        wait = open_page(browser, url)
        fill(browser, "text", LONG)
        labels = predicted_labels(browser, wait)
        assert sorted(labels) == ["negative", "neutral", "positive"]
        stated = browser.find_element(By.ID, "meta").text
        assert ("windows" if long_text else "truncated") in stated, stated
        note = heat_note_after_show(browser, wait)
        assert "truncated" in note and "64" in note, note
        tokens = browser.execute_script(
            "return fetch('/attention', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            "body: JSON.stringify({inputs: arguments[0]})}).then(r => r.json()).then(d => d.tokens)", LONG)
        assert len(tokens) == 64 and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
        # the answer stays beside the map
        assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#result .label")] == labels
        shot(browser, tmp_path, f"long-text-{long_text.get('long_text', 'truncate')}")


def ask(browser, wait, question: str, context: str, answer: dict) -> None:
    """Ask the page a question about ``context``; its answer must be ``answer`` (the engine's)."""
    from selenium.webdriver.common.by import By

    fill(browser, "question", question)
    fill(browser, "context", context)
    browser.find_element(By.ID, "predict").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#result .label") or errors(d))
    assert not errors(browser), errors(browser)
    if answer["answer"]:
        assert browser.find_element(By.CSS_SELECTOR, "#result mark.answer-span").text == answer["answer"]


def test_a_long_context_is_answered_and_its_map_truncated(tmp_path, browser):
    """Question answering reads a long context in windows (doc stride); its heat map
    (question + context) is truncated to the limit, and says so."""

    directory = make_task_model(tmp_path, "qa")
    question, context = "who went ?", LONG
    answer = load(directory).predict({"question": question, "context": context})
    with running(create_app(ServeConfig(model=str(directory)))) as url:
        wait = open_page(browser, url)
        ask(browser, wait, question, context, answer)
        note = heat_note_after_show(browser, wait)
        assert "truncated" in note, note
        shot(browser, tmp_path, "long-context-qa")
