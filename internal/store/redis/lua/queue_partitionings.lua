-- Records that a queue is spread over k partitions and lists every
-- partitioning recorded for it (store.Queues.Partitionings).
-- Arguments: queuePartitioningsArgs (queue.go).
-- Returns every count recorded, 1 among them.
redis.call('SADD', kParts, '1', partitions)
return redis.call('SMEMBERS', kParts)
