# A tiny suite that pytest and unittest-xml-reporting run to write real
# JUnit reports for `argus import junit` (cli/tests/import.rs): one test
# passes, one fails, one is skipped.
import unittest


class Cart(unittest.TestCase):
    def test_adds_an_item(self):
        self.assertEqual(1 + 1, 2)

    def test_pays_by_card(self):
        self.assertEqual("503 <Service Unavailable>", "200 OK")

    @unittest.skip("no card terminal on CI")
    def test_refunds(self):
        pass


if __name__ == "__main__":
    import xmlrunner

    unittest.main(testRunner=xmlrunner.XMLTestRunner(output="reports"), exit=False)
