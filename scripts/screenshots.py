"""Pictures of the dashboard, taken in Chromium through chromedriver from a
running demo: the run page, why a case failed with its replay open, the
live fleet and one device's page, on a desktop and on a phone.

    python3 scripts/screenshots.py DASHBOARD_URL RUN_URL OUT_DIR

scripts/screenshots.sh starts the demo and calls this.
"""

import shutil
import sys
import time

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

DESKTOP = (1400, 1000)
PHONE = (390, 844)


def browser(size):
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--force-device-scale-factor=1", f"--window-size={size[0]},{size[1]}"):
        options.add_argument(flag)
    # The local chromium and chromedriver: nothing is downloaded.
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def shoot(driver, out, name):
    path = f"{out}/{name}"
    driver.save_screenshot(path)
    print(f"{path}: {driver.current_url}")


def why_it_failed(driver, run, out):
    """The first case that failed (one with its "why" line if any): the
    why and the failed step, then its replay opened at the failed step,
    its last pass beside it."""
    driver.get(run)
    wait = WebDriverWait(driver, 20)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "section.case")))
    cases = driver.find_elements(By.CSS_SELECTOR, "section.case:has(.why-line)") or driver.find_elements(
        By.CSS_SELECTOR, "section.case:has(details.attempt[open])")
    if not cases:
        raise SystemExit("screenshots.py: the demo's run has no failed attempt")
    case = cases[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", case)
    time.sleep(0.5)
    shoot(driver, out, "why.png")
    replay = case.find_element(By.CSS_SELECTOR, "details.attempt[open] details.replay")
    driver.execute_script("arguments[0].open = true", replay)
    wait.until(lambda _: replay.find_element(By.CSS_SELECTOR, ".replay-body").get_attribute("innerHTML").strip())
    time.sleep(1)
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", replay)
    shoot(driver, out, "replay.png")


def live(driver, dashboard, out, prefix=""):
    """The fleet page once its screens are drawn, and the first device's page."""
    driver.get(f"{dashboard}fleet")
    wait = WebDriverWait(driver, 20)
    wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, "svg, canvas, .screen")))
    time.sleep(2)
    shoot(driver, out, f"fleet{prefix}.png")
    if prefix:
        return
    links = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "a[href*='/fleet/']")]
    if not links:
        raise SystemExit("screenshots.py: the fleet page links no device page")
    driver.get(links[0])
    time.sleep(2)
    shoot(driver, out, "device.png")


def main():
    dashboard, run, out = sys.argv[1:4]
    desktop = browser(DESKTOP)
    try:
        desktop.get(run)
        time.sleep(1)
        shoot(desktop, out, "run.png")
        why_it_failed(desktop, run, out)
        live(desktop, dashboard, out)
    finally:
        desktop.quit()
    phone = browser(PHONE)
    try:
        phone.get(run)
        time.sleep(1)
        shoot(phone, out, "run-phone.png")
        live(phone, dashboard, out, "-phone")
    finally:
        phone.quit()


if __name__ == "__main__":
    main()
