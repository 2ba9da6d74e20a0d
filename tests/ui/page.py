"""What the browser tests of `ckpt ui` share: a headless Chromium driven through Selenium, and
waiting for what the page shows."""

import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def start():
    """Debian's Chromium, headless, in a fresh profile."""
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="ckpt-ui-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,900",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    return driver


def entries(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#timeline [data-checkpoint]")


def entry_labelled(driver, label):
    """The rendered entry showing `label` (None while the list is being re-rendered)."""
    try:
        for e in entries(driver):
            if e.find_element(By.CSS_SELECTOR, ".title").text == label:
                return e
    except StaleElementReferenceException:
        pass
    return None


def wait(driver, what, seconds=10):
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.02,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: what(d))
    except Exception:
        # What the page showed instead.
        print("page:", driver.find_element(By.TAG_NAME, "body").text[:3000], file=sys.stderr)
        raise


def testid(driver, name):
    return driver.find_element(By.CSS_SELECTOR, f"[data-testid={name}]")
