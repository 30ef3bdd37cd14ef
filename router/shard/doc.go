// Package shard owns the pure shard functions of keyshard: given a rule from
// ks.yaml (hash, range, date_year, date_month, date_day, and keyshard's own
// list and consistent_hash) and the value of the shard key, it says which
// sub-table, and so which node, holds the row. It does no I/O, keeps no
// state beyond the immutable rule, and imports only the standard library;
// package router builds plans on top of it.
//
// # Compatibility contract
//
// keyshard reads kingshard's ks.yaml and must place every row exactly where
// kingshard (github.com/flike/kingshard, proxy/router) would, so that the two
// can run against the same databases. For every input kingshard accepts and
// routes to an existing sub-table, Find returns that sub-table; where
// kingshard fails (a panic, an error, or a rewrite to a table that does not
// exist) Find returns an error. The points below are kingshard's behavior,
// checked in its source (shard.go HashValue/NumValue/Date*Shard.FindForKey,
// numkey.go Parse*Range, router.go parseRule, planbuilder.go getBoundValue):
//
//   - Sub-tables are numbered globally 0..N-1 across the rule's nodes in
//     order; locations [4,4] over [node1,node2] puts 0-3 on node1 and 4-7 on
//     node2. Suffixes are "_%04d" of the index ("_0003"), or of the period
//     for date rules ("_2015", "_201501", "_20150101").
//   - hash: an integer key k goes to uint64(k) mod N, so a negative key wraps
//     two's-complement (-1 mod 8 = 7, -1 mod 3 = 0; not Euclidean modulo).
//     A string that strconv.ParseUint(s, 10, 64) accepts (digits only: no
//     sign, no spaces, leading zeros allowed) is that number; any other
//     string is crc32 IEEE of its bytes.
//   - range: sub-table k holds keys [k*L, (k+1)*L) for table_row_limit L.
//     Keys below 0 or at or past N*L are errors, as in kingshard
//     (ErrKeyOutOfRange). Strings must be base-10 integers.
//   - date_year, date_month, date_day: each node's date_range entry
//     ("2015-2016", "201501-201503", "20150101-20150103" or one value) gives
//     one sub-table per year, month or day. An integer key is a unix
//     timestamp read in the rule's time zone (kingshard uses time.Local;
//     Config.Location overrides it). A string key is read the way kingshard
//     reads it: the year is its first four characters, the month characters
//     5-6 and the day characters 8-9, whatever the separators, so
//     '2015-02-03', '2015-02-03 10:00:00' and '2015/02/03' agree; date_month
//     and date_day need at least 10 characters. A period outside every
//     node's range is an error naming the value (kingshard silently rewrote
//     such a query to a table that does not exist on node 0).
//
// kingshard never routes floats, NULL, or values of other types (its parser
// hands the router only int64 and string); Find returns an error for them on
// the kingshard rule types. The keyshard rules (list, consistent_hash) have
// no kingshard behavior to match and normalize the key to its canonical
// decimal text when it is an integer, so 42, '42', '042' and '+42' agree.
//
// Two consequences for the planner. Integer literals on a date rule are
// unix timestamps, as in kingshard, even against a DATE or DATETIME column
// where MySQL would read 20150101 as a date; a plan that needs the MySQL
// reading must pass the value as a string. And keys compare byte for byte
// (crc32, list lookups), as in kingshard, not under the column's collation:
// 'abc' and 'ABC' may land on different sub-tables.
//
// FindRange is keyshard's own: it returns a superset of the sub-tables that
// can hold keys in a range, and never fewer; the planner may rely on that.
//
// Every Rule is immutable and safe for concurrent use.
package shard
