include!("../build-support/test_services.rs");

fn main() {
    // The owner's tests of a lost commit answer need Postgres.
    postgres_tests();
}
