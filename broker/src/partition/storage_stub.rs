//! TEMPORARY: stands in for the storage crate's follower API until the
//! storage branch is merged. Delete with its `mod` line.
#![allow(dead_code, clippy::todo)]
use bytes::Bytes;
use weir_storage::{Log, LogAppendInfo, StorageError};

pub(crate) trait FollowerLogStub {
    fn append_as_follower(&mut self, records: &Bytes) -> Result<LogAppendInfo, StorageError>;
    fn truncate_to(&mut self, offset: i64) -> Result<bool, StorageError>;
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError>;
}

impl FollowerLogStub for Log {
    fn append_as_follower(&mut self, _records: &Bytes) -> Result<LogAppendInfo, StorageError> {
        todo!()
    }
    fn truncate_to(&mut self, _offset: i64) -> Result<bool, StorageError> {
        todo!()
    }
    fn truncate_fully_and_start_at(&mut self, _offset: i64) -> Result<(), StorageError> {
        todo!()
    }
}
