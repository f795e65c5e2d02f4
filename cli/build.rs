include!("../build-support/test_services.rs");

fn main() {
    postgres_tests();
    client_tests();
    android_tests();
}
