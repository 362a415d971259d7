// A small valid IDL that TestBadIDL breaks one way at a time.
namespace go small

enum Status {
  Ok = 0,
  Missing = 1,
  Moved = 2,
  Busy = 3,
} (
  zaris.answer       = "Ok,Missing",
  zaris.retry        = "Busy",
  zaris.refresh      = "Moved",
  zaris.slow_backoff = "Busy:4",
)

struct PutRequest {
  1: required binary key,
  2: optional i64 ifMatchVersion,
}

struct PutResponse {
  1: required Status status,
  2: required i64 mapEpoch,
}

struct NodeInfo { 1: required i32 id, 2: required string host, 3: required i32 port } struct SegmentInfo { 1: required i32 id, 2: optional i32 owner }
struct ClusterMap { 1: required i64 epoch, 2: required i32 segmentCount,
  3: required list<NodeInfo> nodes, 4: required list<SegmentInfo> segments }

service Small {
  PutResponse Put(1: PutRequest req)
    (zaris.kind = "write", zaris.idempotent = "true", zaris.routing = "key",
     zaris.guards = "ifMatchVersion")

  ClusterMap GetMap() (zaris.kind = "admin")
} (zaris.map_operation = "GetMap")
