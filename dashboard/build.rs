include!("../build-support/test_services.rs");

fn main() {
    browser_tests();
}
