// Drives the grid's WebDriver facade with selenium-webdriver for Node,
// unchanged. Usage: node webdriver_node.mjs URL. Prints `checked: NAME` per
// check; any failure throws and exits non-zero.
import assert from "node:assert/strict";
import { Builder, By, error } from "selenium-webdriver";

const url = process.argv[2];
const checked = (name) => console.log(`checked: ${name}`);

const driver = await new Builder()
  .usingServer(url)
  // selenium-webdriver insists on a browserName; Appium users give an empty one.
  .withCapabilities({ browserName: "", platformName: "Android", "appium:automationName": "Lynkeus", "lynkeus:queueTimeoutMs": 10000 })
  .build();
try {
  const caps = await driver.getCapabilities();
  assert.equal(caps.get("platformName"), "android");
  checked("a session on Android");

  const login = await driver.findElement(new By("accessibility id", "login"));
  assert.equal(await login.getText(), "Log in");
  assert.equal(await (await driver.findElement(By.id("feed"))).getText(), "Browse the feed");
  assert.equal(await (await driver.findElement(By.xpath("//Button[@testId='settings']"))).getText(), "Settings");
  checked("accessibility id, id (as css) and xpath");

  await login.click();
  const email = await driver.findElement(By.css('[id="email"]'));
  await email.sendKeys("ada@example.com");
  assert.equal(await email.getAttribute("value"), "ada@example.com");
  const source = await driver.getPageSource();
  assert.match(source, /<hierarchy route='Login'/);
  checked("click, send keys and the page source");

  await assert.rejects(driver.findElement(By.id("nope")), error.NoSuchElementError);
  await assert.rejects(driver.findElement(By.xpath("//Button[")), error.InvalidSelectorError);
  checked("no such element and invalid selector");

  const png = Buffer.from(await driver.takeScreenshot(), "base64");
  assert.equal(png.subarray(0, 4).toString("latin1"), "\x89PNG");
  checked("a screenshot");
} finally {
  await driver.quit();
}
await assert.rejects(driver.getPageSource(), error.NoSuchSessionError);
checked("quit ends the session");
console.log("all checks passed");
