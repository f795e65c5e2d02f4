"""Drives the grid's WebDriver facade with the real Python clients, unchanged:
Appium-Python-Client and plain selenium. Run by cli/tests/webdriver.rs against
a coordinator with two iOS devices (iPhone 15 / 17.4 / SIM-1, iPhone SE) and
one Android device (Pixel 8), each a simulated shop app.

Usage: webdriver_python.py URL   Prints `checked: NAME` per check; any failure
raises, and the process exits non-zero.
"""

import json
import sys
import urllib.request
import threading
import time
import xml.etree.ElementTree as ET

from appium import webdriver
from appium.common.exceptions import NoSuchContextException
from appium.options.common import AppiumOptions
from appium.webdriver.common.appiumby import AppiumBy
from selenium import webdriver as plain
from selenium.common import exceptions as ex
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions import interaction
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.actions.pointer_input import PointerInput
from selenium.webdriver.common.by import By
from selenium.webdriver.common.options import ArgOptions

URL = sys.argv[1]


def checked(name):
    print(f"checked: {name}", flush=True)


def options(**caps):
    o = AppiumOptions()
    for key, value in caps.items():
        o.set_capability(key.replace("__", ":"), value)
    return o


def session(**caps):
    return webdriver.Remote(URL, options=options(**caps))


def raises(kind, call):
    try:
        call()
    except kind as e:
        return e
    raise AssertionError(f"expected {kind.__name__}")


# --- sessions, capabilities, status -------------------------------------------------
ios = session(platformName="iOS", appium__deviceName="iPhone 15", appium__platformVersion="17.4")
caps = ios.capabilities
assert caps["platformName"] == "ios", caps
assert caps["appium:automationName"] == "Lynkeus", caps
assert caps["appium:deviceName"] == "iPhone 15", caps
assert caps["appium:udid"] == "SIM-1", caps
status = ios.get_status()
assert "ready" in status and "message" in status, status
checked("a session on the iOS device the capabilities name")

android = webdriver.Remote(URL + "/wd/hub", options=options(platformName="Android"))
assert android.capabilities["platformName"] == "android"
assert android.capabilities["appium:deviceName"] == "Pixel 8"
checked("a session on Android under /wd/hub, beside the first: two devices at once")

# --- every locator strategy -----------------------------------------------------------
for using, value, expected in [
    (AppiumBy.ACCESSIBILITY_ID, "login", "Log in"),
    (AppiumBy.ID, "feed", "Browse the feed"),
    (AppiumBy.NAME, "settings", "Settings"),
    (AppiumBy.XPATH, "//Button[@testId='checkout']", "Checkout"),
    (AppiumBy.IOS_PREDICATE, "label == 'Browse the feed'", "Browse the feed"),
    (AppiumBy.ANDROID_UIAUTOMATOR, 'new UiSelector().text("Settings")', "Settings"),
]:
    assert ios.find_element(using, value).text == expected, (using, value)
buttons = ios.find_elements(AppiumBy.CLASS_NAME, "XCUIElementTypeButton")
assert len(buttons) >= 5, len(buttons)
assert ios.find_elements(AppiumBy.ACCESSIBILITY_ID, "missing") == []
checked("accessibility id, id, name, class name, xpath, predicate and uiautomator")

e = raises(ex.InvalidSelectorException, lambda: ios.find_element(AppiumBy.XPATH, "//Button["))
e = raises(ex.InvalidSelectorException, lambda: ios.find_element("-flutter key", "x"))
assert "Locator Strategy '-flutter key' is not supported for this session" in e.msg, e.msg
checked("an invalid selector and an unknown strategy")

# The promo text appears 400 ms after Home mounts: a reset app shows it late.
late = session(platformName="iOS", appium__deviceName="iPhone SE")
raises(ex.NoSuchElementException, lambda: late.find_element(AppiumBy.ACCESSIBILITY_ID, "promo"))
late.quit()
late = session(platformName="iOS", appium__deviceName="iPhone SE")
late.implicitly_wait(3)
assert late.timeouts.implicit_wait == 3
started = time.time()
assert late.find_element(AppiumBy.ACCESSIBILITY_ID, "promo").text == "Free delivery today"
assert time.time() - started < 3
late.quit()
checked("implicit wait finds an element that appears late")

# --- element commands ------------------------------------------------------------------
checkout = ios.find_element(AppiumBy.ACCESSIBILITY_ID, "checkout")
assert checkout.is_enabled() is False
assert checkout.is_displayed() is True
assert checkout.tag_name == "Button"
assert checkout.get_attribute("testId") == "checkout"
assert checkout.get_attribute("nope") is None
assert checkout.get_property("enabled") is False
rect = checkout.rect
assert set(rect) == {"x", "y", "width", "height"} and rect["width"] > 0, rect
assert checkout.location == {"x": rect["x"], "y": rect["y"]}
assert checkout.is_selected() is False
row = ios.find_element(AppiumBy.ID, "banner")
assert row.find_element(AppiumBy.ACCESSIBILITY_ID, "banner-ok").text == "OK"
assert row.find_elements(AppiumBy.ACCESSIBILITY_ID, "login") == []
checked("text, attribute, property, rect, displayed, enabled, selected, find from an element")

ios.find_element(AppiumBy.ACCESSIBILITY_ID, "login").click()
email = ios.find_element(AppiumBy.ACCESSIBILITY_ID, "Email")
email.send_keys("ada@example.com")
assert email.text == "ada@example.com", email.text
assert email.get_attribute("value") == "ada@example.com"
email.clear()
assert email.get_attribute("value") == ""
checked("click, send keys and clear")

# --- page source ------------------------------------------------------------------------
root = ET.fromstring(ios.page_source)
assert root.tag == "hierarchy" and root.get("route") == "Login", root.attrib
fields = root.findall(".//TextField")
assert [f.get("testId") for f in fields][:2] == ["email", "password"], [f.attrib for f in fields]
for attribute in ["i", "kind", "index", "enabled", "displayed", "x", "y", "width", "height", "depth"]:
    assert fields[0].get(attribute) is not None, (attribute, fields[0].attrib)
assert fields[0].get("accessibilityLabel") == "Email"
checked("page source is XML with the documented attributes")

# --- stale element, back ----------------------------------------------------------------
stale = ios.find_element(AppiumBy.ACCESSIBILITY_ID, "password")
ios.back()
assert ios.find_element(AppiumBy.ACCESSIBILITY_ID, "title").text == "Welcome to Shop"
raises(ex.StaleElementReferenceException, lambda: stale.click())
raises(ex.StaleElementReferenceException, lambda: stale.text)
checked("back, and a stale element reference")

# --- actions -----------------------------------------------------------------------------
settings = ios.find_element(AppiumBy.ACCESSIBILITY_ID, "feed").rect
actions = ActionBuilder(ios, mouse=PointerInput(interaction.POINTER_TOUCH, "finger"))
actions.pointer_action.move_to_location(settings["x"] + 10, settings["y"] + 10).pointer_down().pause(0.1).release()
actions.perform()
assert ET.fromstring(ios.page_source).get("route") == "Feed"
ios.swipe(200, 700, 200, 200, 400)
ios.tap([(30, 60)])
ActionChains(ios).click(ios.find_element(AppiumBy.ACCESSIBILITY_ID, "refresh")).perform()
ios.back()
checked("W3C actions: tap, swipe, and a click through ActionChains")

# --- contexts, network, mobile:, screenshot, window -------------------------------------
assert ios.contexts == ["NATIVE_APP"]
assert ios.current_context == "NATIVE_APP"
ios.switch_to.context("NATIVE_APP")
raises(NoSuchContextException, lambda: ios.switch_to.context("WEBVIEW_1"))
checked("contexts")

e = raises(ex.UnknownMethodException, lambda: ios.network_connection)
assert "network" in e.msg, e.msg
checked("network connection is an honest unsupported operation on an app without a network control")

ios.execute_script("mobile: deepLink", {"url": "shop://item/42"})
assert ET.fromstring(ios.page_source).get("route") == "Item"
assert ios.execute_script("mobile: seed") == {"seeded": True}
ios.execute_script("mobile: swipe", {"direction": "up"})
raises(ex.InvalidArgumentException, lambda: ios.execute_script("mobile: swipe", {"direction": "sideways"}))
raises(ex.UnknownMethodException, lambda: ios.execute_script("mobile: nope", {}))
raises(ex.JavascriptException, lambda: ios.execute_script("return document.title"))
checked("mobile: deepLink, an app command, a gesture, and what is refused")

png = ios.get_screenshot_as_png()
assert png.startswith(b"\x89PNG"), png[:8]
shot = ios.find_element(AppiumBy.XPATH, "//*").screenshot_as_png
assert shot.startswith(b"\x89PNG")
assert ios.get_window_size() == {"width": 390, "height": 844}
assert ios.orientation == "PORTRAIT"
checked("screenshot, element screenshot, window size and orientation")

# --- errors the clients map ----------------------------------------------------------------
raises(ex.NoSuchElementException, lambda: ios.find_element(AppiumBy.ACCESSIBILITY_ID, "nope"))
raises(ex.UnknownMethodException, lambda: ios.switch_to.alert.text)
raises(ex.SessionNotCreatedException, lambda: session(platformName="nomatch"))
raises(ex.InvalidArgumentException, lambda: session(platformName={"not": "a string"}))
checked("no such element, unknown command, session not created, invalid argument")

# --- plain selenium ---------------------------------------------------------------------------
o = ArgOptions()
o.set_capability("platformName", "iOS")
o.set_capability("appium:automationName", "Lynkeus")
o.set_capability("appium:deviceName", "iPhone SE")
se = plain.Remote(URL, options=o)
assert se.find_element(By.ID, "login").text == "Log in"
assert se.find_element(By.NAME, "settings").text == "Settings"
assert len(se.find_elements(By.CLASS_NAME, "Button")) >= 5
assert se.find_element(By.XPATH, "//Button[@testId='feed']").is_displayed() is True
assert se.find_element(By.ID, "checkout").get_attribute("testId") == "checkout"
se.quit()
checked("plain selenium: id, name and class name as css, and its JavaScript atoms")

# --- a retried new session request gets the same session ----------------------------------
def new_session_with_key(key):
    body = json.dumps({"capabilities": {"alwaysMatch": {"platformName": "Android", "lynkeus:queueTimeoutMs": 3000}}})
    request = urllib.request.Request(URL + "/session", body.encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("X-Idempotency-Key", key)
    return json.load(urllib.request.urlopen(request))["value"]["sessionId"]


android.quit()
first = new_session_with_key("retry-1")
assert new_session_with_key("retry-1") == first
urllib.request.urlopen(urllib.request.Request(f"{URL}/session/{first}", method="DELETE"))
android = session(platformName="Android", lynkeus__queueTimeoutMs=3000)
checked("X-Idempotency-Key: a retried request gets the same session, not a second device")

# --- quit frees the device; a waiting session; timeouts -----------------------------------
ios_id = ios.session_id
ios.quit()
raises(ex.InvalidSessionIdException, lambda: ios.page_source)
again = session(platformName="iOS", appium__udid="SIM-1", lynkeus__queueTimeoutMs=5000)
checked("quit frees the device; a command after it is an invalid session id")

# Both iOS devices held: a third iOS session waits until one is freed.
other = session(platformName="iOS", appium__deviceName="iPhone SE")
timer = threading.Timer(1.5, other.quit)
timer.start()
started = time.time()
waited = session(platformName="iOS", lynkeus__queueTimeoutMs=20000)
took = time.time() - started
assert 1.2 < took < 10, took
assert waited.capabilities["appium:deviceName"] == "iPhone SE"
checked(f"a session waits in the queue until a device frees up ({took:.1f} s)")

started = time.time()
e = raises(ex.SessionNotCreatedException, lambda: session(platformName="iOS", lynkeus__queueTimeoutMs=1000))
assert 0.9 < time.time() - started < 5, time.time() - started
assert "came free within 1 s" in e.msg, e.msg
checked("a session that waits past its queue timeout is not created, naming the fleet")
waited.quit()

abandoned = session(platformName="iOS", appium__deviceName="iPhone SE", lynkeus__idleTimeoutMs=1000)
time.sleep(3)
e = raises(ex.InvalidSessionIdException, lambda: abandoned.page_source)
assert "no command for 1 s" in e.msg, e.msg
replacement = session(platformName="iOS", appium__deviceName="iPhone SE", lynkeus__queueTimeoutMs=2000)
replacement.quit()
checked("an abandoned session is freed after its idle timeout")

again.quit()
android.quit()
print("all checks passed", flush=True)
