include!("../build-support/test_services.rs");

fn main() {
    postgres_tests();
    browser_tests();
}
