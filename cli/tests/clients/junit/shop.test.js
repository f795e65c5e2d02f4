// A tiny suite jest runs with jest-junit to write a real JUnit report for
// `argus import junit` (cli/tests/import.rs): one passes, one fails, one is skipped.
describe("cart", () => {
  test("adds an item", () => {
    expect(1 + 1).toBe(2);
  });
  test("pays by card", () => {
    expect("503 <Service Unavailable>").toBe("200 OK");
  });
  test.skip("refunds", () => {});
});
