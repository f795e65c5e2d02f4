//! The Fleet service: operators list devices, quarantine, release, drain
//! and resume.

use argus_proto::grpc;
use tonic::{Request, Response, Status};

use super::Services;

#[tonic::async_trait]
impl grpc::fleet_server::Fleet for Services {
    async fn list(
        &self,
        _request: Request<grpc::ListFleetRequest>,
    ) -> Result<Response<grpc::ListFleetResponse>, Status> {
        Ok(Response::new(self.handle.fleet().await?))
    }

    async fn drain(&self, request: Request<grpc::DrainRequest>) -> Result<Response<grpc::DrainResponse>, Status> {
        let worker = request.into_inner().worker_id;
        self.handle.drain(worker, true).await?;
        Ok(Response::new(grpc::DrainResponse {}))
    }

    async fn resume(&self, request: Request<grpc::ResumeRequest>) -> Result<Response<grpc::ResumeResponse>, Status> {
        let worker = request.into_inner().worker_id;
        self.handle.drain(worker, false).await?;
        Ok(Response::new(grpc::ResumeResponse {}))
    }

    async fn quarantine(
        &self,
        request: Request<grpc::QuarantineRequest>,
    ) -> Result<Response<grpc::QuarantineResponse>, Status> {
        let request = request.into_inner();
        let reason = if request.reason.is_empty() { "quarantined by an operator".to_owned() } else { request.reason };
        let device = request.device_id;
        self.handle.quarantine(device, Some(reason)).await?;
        Ok(Response::new(grpc::QuarantineResponse {}))
    }

    async fn release(&self, request: Request<grpc::ReleaseRequest>) -> Result<Response<grpc::ReleaseResponse>, Status> {
        let device = request.into_inner().device_id;
        self.handle.quarantine(device, None).await?;
        Ok(Response::new(grpc::ReleaseResponse {}))
    }
}
