package idempotency

// JournalRecords is how many records j's file has committed, so tests can
// count transactions.
func JournalRecords(j *FileJournal) uint64 { return j.db.Records() }
