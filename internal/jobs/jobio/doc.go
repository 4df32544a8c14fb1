// Package jobio is the input and output layer of batch prediction jobs
// (issue 20): where a job's files live, streaming readers of its input
// rows in chunks, and writers of its output that commit each chunk once.
// It knows nothing of models, the gateway, tenants or the job store; the
// jobs runner (a later session) drives it and records chunk completion in
// its store after WriteChunk returns.
//
// # Where data lives
//
// ParseURI takes "file:NAME" (relative to the server's --jobs-dir),
// "file:///ABS" (only inside the jobs dir) and "s3://BUCKET/KEY". ".."
// segments, absolute paths outside the jobs dir, other hosts and schemes
// are refused with an error naming the URI and the fix. LocalStore opens
// the jobs dir as an os.Root, so a symlink (or any path) that leads out of
// it is refused by the kernel walk, not by string checks. ObjectStore and
// PartStore are the seams: Open gives a streaming reader with a size and
// ReadAt; a PartStore commits parts atomically and publishes the final
// output whole. S3Store implements them over a minio-go client (the one
// internal/registry/s3 builds): GetObject for reads (ranged for Parquet
// and resume), a part is an object under KEY.parts/ (a PUT appears whole
// or not at all: the commit), the output one streamed multipart upload;
// TestS3Store runs it on SeaweedFS under `make test-s3`.
//
// # Readers
//
// NewReader yields Chunks of Options.ChunkRows rows; every input row is
// in exactly one chunk, in Rows (id at the same index in IDs) or in
// Errors (a RowError with its line, field and message). Nothing reads the
// whole input: JSONL and CSV read lines of at most MaxLineBytes (an
// over-long JSONL line is a row error naming the line and the reader goes
// on; an over-long CSV line ends the read with an error naming its byte
// offset, since CSV cannot resynchronise inside a quoted cell); Parquet
// reads 256 rows at a time from one row group. A 200 MB JSONL streams in
// ~5 MiB of heap (TestJSONLBoundedMemory).
//
// CSV's header names the schema's fields: a header without the id column
// or without a field of Options.Fields is an error at open; columns not in
// the schema are ignored; an empty cell is an absent value; cells are
// typed by the field's Kind (Number, String, Bool), a cell that does not
// parse is a row error naming the field.
//
// Options.IDsOnly reads a plain JSONL line (a valid object without
// escapes) for its id alone, without decoding its values (a scan's pass,
// about five times faster); other lines are decoded as always.
//
// Duplicate ids are row errors naming the first line of the id. A bad
// row that has an id (a CSV cell that does not parse) takes the id too,
// so a later row with it is a duplicate: every id belongs to one row. The set
// holds a 64-bit hash and a line number per id (about 40 bytes), up to
// Options.MaxIDs (default 1<<20, ~40 MiB); past the bound ids are no
// longer checked and DupCheck reports it, so a caller can say "duplicates
// checked in the first N rows". Hashes that collide report a false
// duplicate, with odds about n²/2⁶⁵ (3e-8 at a million ids). A reader
// opened at a resume point knows only the ids from there on, so
// duplicates across the resume point are found by ScanInput, the one
// streaming pass a submit makes: it counts rows, keeps the first errors,
// and records every chunk's Start (for resume and for shards, which open
// a reader at their first chunk).
//
// Each Chunk carries its Offset: the byte offset of its first line (JSONL,
// CSV) or its first row number (Parquet, found by row group and
// SeekToRow), and its Line (the number of its first line or row). A
// resumed job passes the first uncommitted chunk's Index and Offset as
// Options.Start and reads on from there. After a seek line numbers count
// from the resume point (the header's line is not re-read into the
// count), unless Options.Line gives the chunk's Line from a scan: then
// they are the lines a read from the start reports.
//
// # Writers
//
// OutputWriter writes chunk i to KEY.parts/chunk-00000i.FORMAT.RANDOM.tmp,
// fsyncs it, renames it into place and fsyncs the directory: the rename
// is the commit (a temporary of its own: two runners writing one part at
// once, after a lost lease, each rename a whole file). OpenOutput on a
// crashed job's parts removes stale .tmp
// files and learns the committed chunks; WriteChunk of a committed chunk
// writes nothing, so a redone chunk appears once. Assemble streams the
// committed parts in chunk order into KEY (published by rename too) and
// can be run again. Output rows carry id, versionId, and outputs or the
// row's error (field, message); CSV writes the columns id, versionId, the
// outputs, errorField, errorMessage; Parquet the same columns, each output
// an optional DOUBLE (a non-number output is an error naming it).
//
// # Why parquet-go/parquet-go
//
// Reading a 100,000-row × 30-column file (an id string and 29 doubles,
// 24 MB, two row groups), decoding every value into a []any, best of
// three runs on this 2-core machine (`cd internal/jobs/jobio/testdata/parquetcmp
// && go run .`, a module of its own so arrow-go stays out of Sluice's):
//
//	parquet-go v0.32.0   115 ms   3.0 M allocations    29 MB allocated
//	arrow-go v18.8.0     109 ms   2.9 M allocations   108 MB allocated
//
// Time is a tie (the allocations are the boxing of values into []any,
// the same for both); arrow-go allocates 3.7x the bytes (it materialises
// Arrow record batches first) and brings flatbuffers, thrift, grpc and
// x/exp into the build. parquet-go reads rows straight from row groups,
// which is the shape of a job's chunks, seeks to a row for resume, copies
// row groups into a new file for Assemble, and is pure Go, kept up
// (releases through 2026). So parquet-go.
package jobio
