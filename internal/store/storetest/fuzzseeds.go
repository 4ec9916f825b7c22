package storetest

import (
	"strings"
	"testing"
)

// The seeds of the fuzz targets that the memory and Redis stores share (the
// same target name and arguments in both): each named by what it tries.

// IdemSeeds adds the seeds of FuzzIdempotencyRecord: IdemInput's fields,
// Prog first.
func IdemSeeds(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x03\x00\x05\x00\x00\x00\x00\x03\x01\x00\x00\x00\x01\x00\x01\x00\x00\x00\x00\x00"), "k", "k", "f", "f", []byte("r"), "m")                                                             // abandon_takeover
	f.Add([]byte("\x00\x00\x00\x03\x00\x01\x01\x03\x01\x00\x00\xff\x01\x01\x10\xff\x00\x00\x00\x03\x00\x01\x01\x03"), "a}b", "{a}b", "%s", "%d", []byte("\r\n%s\x00\xff*1\r\n$-1\r\n"), "%%.*+-?^$()[]\x00\r\n")        // braces_and_lua_specials
	f.Add([]byte("\x00\x00\x00\x03\x01\x00\x00\x05\x00\x00\x00\x00\x00\x00\x01\x00"), "orders/1", "orders/2", "fp-a", "fp-b", []byte("\x00result\xff\x00"), "boom")                                                     // complete_then_read
	f.Add([]byte(""), "k", "k", "f", "f", []byte(""), "")                                                                                                                                                               // empty_program
	f.Add([]byte("\x00\x00\x00\x03\x00\x00\x01\x03\x01\x00\x00\xff\x00\x00\x00\x03\x00\x00\x01\x03"), "k", "k", "", "\x00", []byte(""), "")                                                                             // empty_vs_nul_fingerprint
	f.Add([]byte("\x00\x00\x00\x00\x02\x00\x00\x04\x03\x00\t\x00\x01\x00\x00\x06"), "k", "other", "f", "f", []byte(""), "")                                                                                             // extend_then_finish
	f.Add([]byte("\x00\x00\x00\x03\x01\x00\x10\x02\x00\x00\x00\x00\x00\x00\x01\x00"), "k", "k2", "f", "g", []byte(""), "line1\nline2\x00\xff")                                                                          // fail_then_read
	f.Add([]byte(strings.Repeat("\x00\x00\x00\x03\x01\x00\x01\x04\x03\x00\a\x01\x02\x01\x02\x05", 8)+"\x00\x01\x01\x01"), "\x00", "\xff", "\u2028", "é", []byte(strings.Repeat("\x00", 300)), strings.Repeat("m", 300)) // long_program
	f.Add([]byte("\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01\x00\x01\x00\x01\x00"), "", "", "", "", []byte(""), "")                                                                                   // not_owner
	f.Add([]byte("\x00\x00\x00\x03\x01\x00\x00\x00\x03\x00\x06\x00\x00\x00\x01\x00"), "k", "j", "a", "a\x00", []byte("xyz"), "")                                                                                        // result_expires
	f.Add([]byte("\x00\x00\x00\x00\x03\x00\x06\x00\x00\x00\x01\x00\x03\x00\n\x00\x00\x00\x01\x00"), "k", "j", "a", "b", []byte(""), "")                                                                                 // retention_after_abandon
	f.Add([]byte("\x00\x00\x00\x03\x01\x00 \x02\x00\x00\x01\x00"), "k", "k2", "f", "g", []byte(""), "")                                                                                                                 // retryable_clears
	f.Add([]byte("\x00\x00\x00\x03\x00\x01\x01\x03\x01\x01\x01\x02\x00\x01\x00\x00"), "same", "same", "fp", "fp2", []byte("\xff\xfe"), "\xc3")                                                                          // same_key_two_fps
	f.Add([]byte("\x00\x00\x00\x01\x03\x00\x02\x00\x03\x00\x04\x00\x02\x00\x00\x01\x03\x00\x01\x02\x01\x00\x00\x01"), "k", "j", "a", "b", []byte("abc"), "x")                                                           // truncation
}

// QueueSeeds adds the seeds of FuzzQueuePayload: QueueInput's fields, Queue
// first.
func QueueSeeds(f *testing.F) {
	f.Add("default:orders", []byte("hello"), []byte("world"), "", false)                               // ascii
	f.Add("q", []byte("\x00\x01\xff\x00"), []byte("\x01"), "", true)                                   // binary
	f.Add("q}{x", []byte("\x01\r\n"), []byte("%s\x00|1|2|"), "}{%", true)                              // braces_and_lua_specials
	f.Add("q", []byte("first"), []byte("second"), "order-7", false)                                    // dedup
	f.Add("q", []byte("a"), []byte("b"), "\x00|\xff", true)                                            // dedup_delayed_binary_id
	f.Add("default:q", []byte(""), []byte(""), "", false)                                              // empty_payloads
	f.Add("", []byte("x"), []byte(""), "d", false)                                                     // empty_queue_name
	f.Add("\xff", []byte("\xed\xa0\x80"), []byte("\xc3"), "", false)                                   // invalid_utf8
	f.Add("q", []byte(strings.Repeat("\x00\xff", 4096)), []byte(strings.Repeat("z", 1000)), "", false) // large
	f.Add("q", []byte("\x01\x01"), []byte("\x00"), "", false)                                          // version_byte_prefix
}
