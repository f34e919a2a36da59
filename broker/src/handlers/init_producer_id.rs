//! InitProducerId (key 22), v0-5, for idempotent producers (KIP-98, KIP-360):
//! a fresh producer id from the controller-allocated block, epoch 0.
//! Transactional ids are not served yet: they get COORDINATOR_NOT_AVAILABLE.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use crate::context::BrokerContext;
use crate::error::controller_error_code;

/// Allocates a producer id.
pub async fn handle(
    ctx: &BrokerContext,
    _version: i16,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if request.transactional_id.is_some() {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        return response;
    }
    match ctx.producer_ids.next_id(&ctx.controller).await {
        Ok(id) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::error!(error = %e, "allocating producer ids failed");
            response.error_code = controller_error_code(&e);
        }
    }
    response
}
