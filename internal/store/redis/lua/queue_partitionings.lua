-- Records that a queue is spread over k partitions and lists every
-- partitioning recorded for it (store.Queues.Partitionings).
-- KEYS[1]: the queue's set of partition counts, in the queue's own slot;
--          no expiry: a count leaves it never, so that every partition
--          that may hold a message is visited (one small set per queue
--          configured with partitions).
-- ARGV[3]: k
-- Returns every count recorded, 1 among them.
redis.call('SADD', KEYS[1], '1', ARGV[3])
return redis.call('SMEMBERS', KEYS[1])
