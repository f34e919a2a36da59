//! DescribeCluster (key 60), v0-1 (KIP-700): brokers, controller and cluster
//! id from the metadata image.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use weir_controller::acl::{AclOperation, AclResourceType, CLUSTER_NAME};

use super::str_bytes;
use crate::authorizer::RequestAuth;
use crate::context::BrokerContext;

/// Answers from the current image, each broker with its endpoint of
/// `listener` (the request's listener; brokers without it are left out).
/// v1 `endpoint_type` 1 (brokers) is the only endpoint type served; 2
/// (controllers) gets UNSUPPORTED_ENDPOINT_TYPE.
pub fn handle(
    ctx: &BrokerContext,
    listener: &str,
    _version: i16,
    request: DescribeClusterRequest,
    auth: &RequestAuth<'_>,
) -> DescribeClusterResponse {
    let image = ctx.metadata();
    let mut response = DescribeClusterResponse::default();
    response.endpoint_type = request.endpoint_type;
    if request.endpoint_type != 1 {
        response.error_code = 114; // UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = Some(str_bytes("only the brokers endpoint type is supported"));
        return response;
    }
    response.cluster_id = str_bytes(image.cluster_id.clone());
    response.controller_id = BrokerId(image.controller_id.unwrap_or(-1));
    // Kafka's handleDescribeCluster: 0 without Describe on the cluster.
    let requested = request.include_cluster_authorized_operations;
    response.cluster_authorized_operations = if !requested || auth.cluster(AclOperation::Describe) {
        auth.authorized_operations(AclResourceType::Cluster, CLUSTER_NAME, requested)
    } else {
        0
    };
    for b in image.brokers.values() {
        if b.fenced && !request.include_fenced_brokers {
            continue;
        }
        if let Some(ep) = b.endpoint(listener) {
            let mut broker = DescribeClusterBroker::default();
            broker.broker_id = BrokerId(b.broker_id);
            broker.host = str_bytes(ep.host.clone());
            broker.port = i32::from(ep.port);
            broker.rack = b.rack.clone().map(str_bytes);
            broker.is_fenced = b.fenced;
            response.brokers.push(broker);
        }
    }
    response
}
