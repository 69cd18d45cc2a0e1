package journal

// FileRecords is how many records j's file has committed, so tests can
// count transactions.
func FileRecords(j *File) uint64 { return j.db.Records() }
