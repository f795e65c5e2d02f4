include!("../build-support/test_services.rs");

fn main() {
    android_tests();
}
