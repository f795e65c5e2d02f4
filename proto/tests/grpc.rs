//! The generated gRPC types: messages round-trip, and the descriptor set
//! names every service for reflection.

use argus_proto::grpc::{self, worker_message};
use prost::Message;

#[test]
fn a_register_message_round_trips() {
    let register = grpc::Register {
        worker_id_prefix: "mac-mini".into(),
        hostname: "mac-mini.local".into(),
        version: "0.1.0".into(),
        devices: vec![grpc::Device {
            slot: "8123".into(),
            port: 8123,
            platform: "ios".into(),
            bridge: "127.0.0.1".into(),
            state: grpc::DeviceState::Waiting as i32,
            ..Default::default()
        }],
        labels: Default::default(),
    };
    let message = grpc::WorkerMessage { kind: Some(worker_message::Kind::Register(register.clone())) };
    let decoded = grpc::WorkerMessage::decode(message.encode_to_vec().as_slice()).unwrap();
    assert_eq!(decoded.kind, Some(worker_message::Kind::Register(register)));
}

#[test]
fn the_descriptor_set_lists_every_service() {
    let set = prost_types::FileDescriptorSet::decode(grpc::FILE_DESCRIPTOR_SET).unwrap();
    let services: Vec<String> =
        set.file.iter().flat_map(|f| f.service.iter().map(|s| s.name.clone().unwrap_or_default())).collect();
    assert_eq!(services, ["Workers", "Runs", "Fleet", "Builds"]);
}
