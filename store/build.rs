include!("../build-support/test_services.rs");

fn main() {
    // `sqlx::migrate!` embeds the migrations when this crate compiles:
    // rebuild when one is added or changed.
    println!("cargo:rerun-if-changed=../migrations");
    postgres_tests();
}
