package postgres

// Each major version's wait event names, class by class, in numbering
// order: the lists waitEventTables (waitevents.go) is made of.

// The lists below were taken from live servers (15.18, 16.14, 17.10, 18.4,
// 19rc1) by having each server's own pgstat_get_wait_event name every code,
// the function pg_stat_activity uses (TestWaitEventTablesLive does it on
// every test run); 17 to 19 were also checked against pg_wait_events. The
// trailing comments are the event numbers.

// bufferPin is the BufferPin class: one event in every version.
var bufferPin = []string{"BufferPin"}

// LWLock, 15 and 16: the individual named locks (the "Lock" suffix is
// not shown). The gaps are numbers of removed locks.
var lwlockIndividual15 = []string{
	"", "ShmemIndex", "OidGen", "XidGen", // 0-3
	"ProcArray", "SInvalRead", "SInvalWrite", "WALBufMapping", // 4-7
	"WALWrite", "ControlFile", "", "XactSLRU", // 8-11
	"SubtransSLRU", "MultiXactGen", "MultiXactOffsetSLRU", "MultiXactMemberSLRU", // 12-15
	"RelCacheInit", "CheckpointerComm", "TwoPhaseState", "TablespaceCreate", // 16-19
	"BtreeVacuum", "AddinShmemInit", "Autovacuum", "AutovacuumSchedule", // 20-23
	"SyncScan", "RelationMapping", "NotifySLRU", "NotifyQueue", // 24-27
	"SerializableXactHash", "SerializableFinishedList", "SerializablePredicateList", "SerialSLRU", // 28-31
	"SyncRep", "BackgroundWorker", "DynamicSharedMemoryControl", "AutoFile", // 32-35
	"ReplicationSlotAllocation", "ReplicationSlotControl", "CommitTsSLRU", "CommitTs", // 36-39
	"ReplicationOrigin", "MultiXactTruncation", "OldSnapshotTimeMap", "LogicalRepWorker", // 40-43
	"XactTruncation", "", "WrapLimitsVacuum", "NotifyQueueTail", // 44-47
}

// LWLock, 15: the built-in tranches, numbered on from the individual
// locks; extension tranches follow.
var lwlockTranches15 = []string{
	"XactBuffer", "CommitTsBuffer", "SubtransBuffer", "MultiXactOffsetBuffer", // 48-51
	"MultiXactMemberBuffer", "NotifyBuffer", "SerialBuffer", "WALInsert", // 52-55
	"BufferContent", "ReplicationOriginState", "ReplicationSlotIO", "LockFastPath", // 56-59
	"BufferMapping", "LockManager", "PredicateLockManager", "ParallelHashJoin", // 60-63
	"ParallelQueryDSA", "PerSessionDSA", "PerSessionRecordType", "PerSessionRecordTypmod", // 64-67
	"SharedTupleStore", "SharedTidBitmap", "ParallelAppend", "PerXactPredicateList", // 68-71
	"PgStatsDSA", "PgStatsHash", "PgStatsData", // 72-74
}

// LWLock, 16: tranches added after 15's.
var lwlockTranchesAdded16 = []string{
	"LogicalRepLauncherDSA", "LogicalRepLauncherHash", // 75-76
}

// LWLock, 17 and 18: the individual locks. The SLRU locks (11, 12, 14,
// 15, 26, 31, 38) became tranches and left gaps.
var lwlockIndividual17 = []string{
	"", "ShmemIndex", "OidGen", "XidGen", "ProcArray", // 0-4
	"SInvalRead", "SInvalWrite", "WALBufMapping", "WALWrite", "ControlFile", // 5-9
	"", "", "", "MultiXactGen", "", // 10-14
	"", "RelCacheInit", "CheckpointerComm", "TwoPhaseState", "TablespaceCreate", // 15-19
	"BtreeVacuum", "AddinShmemInit", "Autovacuum", "AutovacuumSchedule", "SyncScan", // 20-24
	"RelationMapping", "", "NotifyQueue", "SerializableXactHash", "SerializableFinishedList", // 25-29
	"SerializablePredicateList", "", "SyncRep", "BackgroundWorker", "DynamicSharedMemoryControl", // 30-34
	"AutoFile", "ReplicationSlotAllocation", "ReplicationSlotControl", "", "CommitTs", // 35-39
	"ReplicationOrigin", "MultiXactTruncation", "", "LogicalRepWorker", "XactTruncation", // 40-44
	"", "WrapLimitsVacuum", "NotifyQueueTail", "WaitEventCustom", "WALSummarizer", // 45-49
	"DSMRegistry", "InjectionPoint", "SerialControl", // 50-52
}

// LWLock, 18: individual locks added after 17's.
var lwlockIndividualAdded18 = []string{
	"AioWorkerSubmissionQueue", // 53
}

// LWLock, 17: the built-in tranches.
var lwlockTranches17 = []string{
	"XactBuffer", "CommitTsBuffer", "SubtransBuffer", "MultiXactOffsetBuffer", // 53-56
	"MultiXactMemberBuffer", "NotifyBuffer", "SerialBuffer", "WALInsert", // 57-60
	"BufferContent", "ReplicationOriginState", "ReplicationSlotIO", "LockFastPath", // 61-64
	"BufferMapping", "LockManager", "PredicateLockManager", "ParallelHashJoin", // 65-68
	"ParallelQueryDSA", "PerSessionDSA", "PerSessionRecordType", "PerSessionRecordTypmod", // 69-72
	"SharedTupleStore", "SharedTidBitmap", "ParallelAppend", "PerXactPredicateList", // 73-76
	"PgStatsDSA", "PgStatsHash", "PgStatsData", "LogicalRepLauncherDSA", // 77-80
	"LogicalRepLauncherHash", "DSMRegistryDSA", "DSMRegistryHash", "CommitTsSLRU", // 81-84
	"MultiXactMemberSLRU", "MultiXactOffsetSLRU", "NotifySLRU", "SerialSLRU", // 85-88
	"SubtransSLRU", "XactSLRU", "ParallelVacuumDSA", // 89-91
}

// LWLock, 18: the built-in tranches (ParallelBtreeScan was inserted, so
// those after it moved).
var lwlockTranches18 = []string{
	"XactBuffer", "CommitTsBuffer", "SubtransBuffer", "MultiXactOffsetBuffer", // 54-57
	"MultiXactMemberBuffer", "NotifyBuffer", "SerialBuffer", "WALInsert", // 58-61
	"BufferContent", "ReplicationOriginState", "ReplicationSlotIO", "LockFastPath", // 62-65
	"BufferMapping", "LockManager", "PredicateLockManager", "ParallelHashJoin", // 66-69
	"ParallelBtreeScan", "ParallelQueryDSA", "PerSessionDSA", "PerSessionRecordType", // 70-73
	"PerSessionRecordTypmod", "SharedTupleStore", "SharedTidBitmap", "ParallelAppend", // 74-77
	"PerXactPredicateList", "PgStatsDSA", "PgStatsHash", "PgStatsData", // 78-81
	"LogicalRepLauncherDSA", "LogicalRepLauncherHash", "DSMRegistryDSA", "DSMRegistryHash", // 82-85
	"CommitTsSLRU", "MultiXactMemberSLRU", "MultiXactOffsetSLRU", "NotifySLRU", // 86-89
	"SerialSLRU", "SubtransSLRU", "XactSLRU", "ParallelVacuumDSA", // 90-93
	"AioUringCompletion", // 94
}

// Lock, 16 to 18: the lock tag types, which pg_stat_activity shows in
// lower case; 15 lacks the last.
var lockTags16 = []string{
	"relation", "extend", "frozenid", "page", "tuple", // 0-4
	"transactionid", "virtualxid", "spectoken", "object", "userlock", // 5-9
	"advisory", "applytransaction", // 10-11
}

// Activity, 15.
var activity15 = []string{
	"ArchiverMain", "AutoVacuumMain", "BgWriterHibernate", "BgWriterMain", // 0-3
	"CheckpointerMain", "LogicalApplyMain", "LogicalLauncherMain", "RecoveryWalStream", // 4-7
	"SysLoggerMain", "WalReceiverMain", "WalSenderMain", "WalWriterMain", // 8-11
}

// Activity, 16.
var activity16 = []string{
	"ArchiverMain", "AutoVacuumMain", "BgWriterHibernate", "BgWriterMain", // 0-3
	"CheckpointerMain", "LogicalApplyMain", "LogicalLauncherMain", "LogicalParallelApplyMain", // 4-7
	"RecoveryWalStream", "SysLoggerMain", "WalReceiverMain", "WalSenderMain", // 8-11
	"WalWriterMain", // 12
}

// Activity. From 17 on, names are derived from wait_event_names.txt and
// spelt differently (AutovacuumMain, not AutoVacuumMain).
var activity17 = []string{
	"ArchiverMain", "AutovacuumMain", "BgwriterHibernate", "BgwriterMain", // 0-3
	"CheckpointerMain", "LogicalApplyMain", "LogicalLauncherMain", "LogicalParallelApplyMain", // 4-7
	"RecoveryWalStream", "ReplicationSlotsyncMain", "ReplicationSlotsyncShutdown", "SysloggerMain", // 8-11
	"WalReceiverMain", "WalSenderMain", "WalSummarizerWal", "WalWriterMain", // 12-15
}

// Activity, 18.
var activity18 = []string{
	"ArchiverMain", "AutovacuumMain", "BgwriterHibernate", // 0-2
	"BgwriterMain", "CheckpointerMain", "CheckpointerShutdown", // 3-5
	"IoWorkerMain", "LogicalApplyMain", "LogicalLauncherMain", // 6-8
	"LogicalParallelApplyMain", "RecoveryWalStream", "ReplicationSlotsyncMain", // 9-11
	"ReplicationSlotsyncShutdown", "SysloggerMain", "WalReceiverMain", // 12-14
	"WalSenderMain", "WalSummarizerWal", "WalWriterMain", // 15-17
}

// Client, 15 and 16.
var client15 = []string{
	"ClientRead", "ClientWrite", "GSSOpenServer", "LibPQWalReceiverConnect", // 0-3
	"LibPQWalReceiverReceive", "SSLOpenServer", "WalSenderWaitForWAL", "WalSenderWriteData", // 4-7
}

// Client, 17 and 18.
var client17 = []string{
	"ClientRead", "ClientWrite", "GssOpenServer", "LibpqwalreceiverConnect", // 0-3
	"LibpqwalreceiverReceive", "SslOpenServer", "WaitForStandbyConfirmation", "WalSenderWaitForWal", // 4-7
	"WalSenderWriteData", // 8
}

// IPC, 15.
var ipc15 = []string{
	"AppendReady", "ArchiveCleanupCommand", "ArchiveCommand", // 0-2
	"BackendTermination", "BackupWaitWalArchive", "BgWorkerShutdown", // 3-5
	"BgWorkerStartup", "BtreePage", "BufferIO", // 6-8
	"CheckpointDone", "CheckpointStart", "ExecuteGather", // 9-11
	"HashBatchAllocate", "HashBatchElect", "HashBatchLoad", // 12-14
	"HashBuildAllocate", "HashBuildElect", "HashBuildHashInner", // 15-17
	"HashBuildHashOuter", "HashGrowBatchesAllocate", "HashGrowBatchesDecide", // 18-20
	"HashGrowBatchesElect", "HashGrowBatchesFinish", "HashGrowBatchesRepartition", // 21-23
	"HashGrowBucketsAllocate", "HashGrowBucketsElect", "HashGrowBucketsReinsert", // 24-26
	"LogicalSyncData", "LogicalSyncStateChange", "MessageQueueInternal", // 27-29
	"MessageQueuePutMessage", "MessageQueueReceive", "MessageQueueSend", // 30-32
	"ParallelBitmapScan", "ParallelCreateIndexScan", "ParallelFinish", // 33-35
	"ProcArrayGroupUpdate", "ProcSignalBarrier", "Promote", // 36-38
	"RecoveryConflictSnapshot", "RecoveryConflictTablespace", "RecoveryEndCommand", // 39-41
	"RecoveryPause", "ReplicationOriginDrop", "ReplicationSlotDrop", // 42-44
	"RestoreCommand", "SafeSnapshot", "SyncRep", // 45-47
	"WalReceiverExit", "WalReceiverWaitStart", "XactGroupUpdate", // 48-50
}

// IPC, 16.
var ipc16 = []string{
	"AppendReady", "ArchiveCleanupCommand", "ArchiveCommand", // 0-2
	"BackendTermination", "BackupWaitWalArchive", "BgWorkerShutdown", // 3-5
	"BgWorkerStartup", "BtreePage", "BufferIO", // 6-8
	"CheckpointDone", "CheckpointStart", "ExecuteGather", // 9-11
	"HashBatchAllocate", "HashBatchElect", "HashBatchLoad", // 12-14
	"HashBuildAllocate", "HashBuildElect", "HashBuildHashInner", // 15-17
	"HashBuildHashOuter", "HashGrowBatchesDecide", "HashGrowBatchesElect", // 18-20
	"HashGrowBatchesFinish", "HashGrowBatchesReallocate", "HashGrowBatchesRepartition", // 21-23
	"HashGrowBucketsElect", "HashGrowBucketsReallocate", "HashGrowBucketsReinsert", // 24-26
	"LogicalApplySendData", "LogicalParallelApplyStateChange", "LogicalSyncData", // 27-29
	"LogicalSyncStateChange", "MessageQueueInternal", "MessageQueuePutMessage", // 30-32
	"MessageQueueReceive", "MessageQueueSend", "ParallelBitmapScan", // 33-35
	"ParallelCreateIndexScan", "ParallelFinish", "ProcArrayGroupUpdate", // 36-38
	"ProcSignalBarrier", "Promote", "RecoveryConflictSnapshot", // 39-41
	"RecoveryConflictTablespace", "RecoveryEndCommand", "RecoveryPause", // 42-44
	"ReplicationOriginDrop", "ReplicationSlotDrop", "RestoreCommand", // 45-47
	"SafeSnapshot", "SyncRep", "WalReceiverExit", // 48-50
	"WalReceiverWaitStart", "XactGroupUpdate", // 51-52
}

// IPC, 17 and 18.
var ipc17 = []string{
	"AppendReady", "ArchiveCleanupCommand", "ArchiveCommand", // 0-2
	"BackendTermination", "BackupWaitWalArchive", "BgworkerShutdown", // 3-5
	"BgworkerStartup", "BtreePage", "BufferIo", // 6-8
	"CheckpointDelayComplete", "CheckpointDelayStart", "CheckpointDone", // 9-11
	"CheckpointStart", "ExecuteGather", "HashBatchAllocate", // 12-14
	"HashBatchElect", "HashBatchLoad", "HashBuildAllocate", // 15-17
	"HashBuildElect", "HashBuildHashInner", "HashBuildHashOuter", // 18-20
	"HashGrowBatchesDecide", "HashGrowBatchesElect", "HashGrowBatchesFinish", // 21-23
	"HashGrowBatchesReallocate", "HashGrowBatchesRepartition", "HashGrowBucketsElect", // 24-26
	"HashGrowBucketsReallocate", "HashGrowBucketsReinsert", "LogicalApplySendData", // 27-29
	"LogicalParallelApplyStateChange", "LogicalSyncData", "LogicalSyncStateChange", // 30-32
	"MessageQueueInternal", "MessageQueuePutMessage", "MessageQueueReceive", // 33-35
	"MessageQueueSend", "MultixactCreation", "ParallelBitmapScan", // 36-38
	"ParallelCreateIndexScan", "ParallelFinish", "ProcarrayGroupUpdate", // 39-41
	"ProcSignalBarrier", "Promote", "RecoveryConflictSnapshot", // 42-44
	"RecoveryConflictTablespace", "RecoveryEndCommand", "RecoveryPause", // 45-47
	"ReplicationOriginDrop", "ReplicationSlotDrop", "RestoreCommand", // 48-50
	"SafeSnapshot", "SyncRep", "WalReceiverExit", // 51-53
	"WalReceiverWaitStart", "WalSummaryReady", "XactGroupUpdate", // 54-56
}

// Timeout, 15.
var timeout15 = []string{
	"BaseBackupThrottle", "CheckpointWriteDelay", "PgSleep", "RecoveryApplyDelay", // 0-3
	"RecoveryRetrieveRetryInterval", "RegisterSyncRequest", "VacuumDelay", "VacuumTruncate", // 4-7
}

// Timeout, 16.
var timeout16 = []string{
	"BaseBackupThrottle", "CheckpointWriteDelay", "PgSleep", "RecoveryApplyDelay", // 0-3
	"RecoveryRetrieveRetryInterval", "RegisterSyncRequest", "SpinDelay", "VacuumDelay", // 4-7
	"VacuumTruncate", // 8
}

// Timeout, 17 and 18.
var timeout17 = []string{
	"BaseBackupThrottle", "CheckpointWriteDelay", "PgSleep", "RecoveryApplyDelay", // 0-3
	"RecoveryRetrieveRetryInterval", "RegisterSyncRequest", "SpinDelay", "VacuumDelay", // 4-7
	"VacuumTruncate", "WalSummarizerError", // 8-9
}

// IO, 15. VersionFileSync came last, out of alphabetical order.
var io15 = []string{
	"BaseBackupRead", "BaseBackupSync", "BaseBackupWrite", // 0-2
	"BufFileRead", "BufFileWrite", "BufFileTruncate", // 3-5
	"ControlFileRead", "ControlFileSync", "ControlFileSyncUpdate", // 6-8
	"ControlFileWrite", "ControlFileWriteUpdate", "CopyFileRead", // 9-11
	"CopyFileWrite", "DataFileExtend", "DataFileFlush", // 12-14
	"DataFileImmediateSync", "DataFilePrefetch", "DataFileRead", // 15-17
	"DataFileSync", "DataFileTruncate", "DataFileWrite", // 18-20
	"DSMFillZeroWrite", "LockFileAddToDataDirRead", "LockFileAddToDataDirSync", // 21-23
	"LockFileAddToDataDirWrite", "LockFileCreateRead", "LockFileCreateSync", // 24-26
	"LockFileCreateWrite", "LockFileReCheckDataDirRead", "LogicalRewriteCheckpointSync", // 27-29
	"LogicalRewriteMappingSync", "LogicalRewriteMappingWrite", "LogicalRewriteSync", // 30-32
	"LogicalRewriteTruncate", "LogicalRewriteWrite", "RelationMapRead", // 33-35
	"RelationMapSync", "RelationMapWrite", "ReorderBufferRead", // 36-38
	"ReorderBufferWrite", "ReorderLogicalMappingRead", "ReplicationSlotRead", // 39-41
	"ReplicationSlotRestoreSync", "ReplicationSlotSync", "ReplicationSlotWrite", // 42-44
	"SLRUFlushSync", "SLRURead", "SLRUSync", // 45-47
	"SLRUWrite", "SnapbuildRead", "SnapbuildSync", // 48-50
	"SnapbuildWrite", "TimelineHistoryFileSync", "TimelineHistoryFileWrite", // 51-53
	"TimelineHistoryRead", "TimelineHistorySync", "TimelineHistoryWrite", // 54-56
	"TwophaseFileRead", "TwophaseFileSync", "TwophaseFileWrite", // 57-59
	"VersionFileWrite", "WALSenderTimelineHistoryRead", "WALBootstrapSync", // 60-62
	"WALBootstrapWrite", "WALCopyRead", "WALCopySync", // 63-65
	"WALCopyWrite", "WALInitSync", "WALInitWrite", // 66-68
	"WALRead", "WALSync", "WALSyncMethodAssign", // 69-71
	"WALWrite", "VersionFileSync", // 72-73
}

// IO, 16.
var io16 = []string{
	"BaseBackupRead", "BaseBackupSync", "BaseBackupWrite", // 0-2
	"BufFileRead", "BufFileWrite", "BufFileTruncate", // 3-5
	"ControlFileRead", "ControlFileSync", "ControlFileSyncUpdate", // 6-8
	"ControlFileWrite", "ControlFileWriteUpdate", "CopyFileRead", // 9-11
	"CopyFileWrite", "DataFileExtend", "DataFileFlush", // 12-14
	"DataFileImmediateSync", "DataFilePrefetch", "DataFileRead", // 15-17
	"DataFileSync", "DataFileTruncate", "DataFileWrite", // 18-20
	"DSMAllocate", "DSMFillZeroWrite", "LockFileAddToDataDirRead", // 21-23
	"LockFileAddToDataDirSync", "LockFileAddToDataDirWrite", "LockFileCreateRead", // 24-26
	"LockFileCreateSync", "LockFileCreateWrite", "LockFileReCheckDataDirRead", // 27-29
	"LogicalRewriteCheckpointSync", "LogicalRewriteMappingSync", "LogicalRewriteMappingWrite", // 30-32
	"LogicalRewriteSync", "LogicalRewriteTruncate", "LogicalRewriteWrite", // 33-35
	"RelationMapRead", "RelationMapReplace", "RelationMapWrite", // 36-38
	"ReorderBufferRead", "ReorderBufferWrite", "ReorderLogicalMappingRead", // 39-41
	"ReplicationSlotRead", "ReplicationSlotRestoreSync", "ReplicationSlotSync", // 42-44
	"ReplicationSlotWrite", "SLRUFlushSync", "SLRURead", // 45-47
	"SLRUSync", "SLRUWrite", "SnapbuildRead", // 48-50
	"SnapbuildSync", "SnapbuildWrite", "TimelineHistoryFileSync", // 51-53
	"TimelineHistoryFileWrite", "TimelineHistoryRead", "TimelineHistorySync", // 54-56
	"TimelineHistoryWrite", "TwophaseFileRead", "TwophaseFileSync", // 57-59
	"TwophaseFileWrite", "VersionFileWrite", "WALSenderTimelineHistoryRead", // 60-62
	"WALBootstrapSync", "WALBootstrapWrite", "WALCopyRead", // 63-65
	"WALCopySync", "WALCopyWrite", "WALInitSync", // 66-68
	"WALInitWrite", "WALRead", "WALSync", // 69-71
	"WALSyncMethodAssign", "WALWrite", "VersionFileSync", // 72-74
}

// IO, 17.
var io17 = []string{
	"BasebackupRead", "BasebackupSync", "BasebackupWrite", // 0-2
	"BuffileRead", "BuffileTruncate", "BuffileWrite", // 3-5
	"ControlFileRead", "ControlFileSync", "ControlFileSyncUpdate", // 6-8
	"ControlFileWrite", "ControlFileWriteUpdate", "CopyFileRead", // 9-11
	"CopyFileWrite", "DataFileExtend", "DataFileFlush", // 12-14
	"DataFileImmediateSync", "DataFilePrefetch", "DataFileRead", // 15-17
	"DataFileSync", "DataFileTruncate", "DataFileWrite", // 18-20
	"DsmAllocate", "DsmFillZeroWrite", "LockFileAddtodatadirRead", // 21-23
	"LockFileAddtodatadirSync", "LockFileAddtodatadirWrite", "LockFileCreateRead", // 24-26
	"LockFileCreateSync", "LockFileCreateWrite", "LockFileRecheckdatadirRead", // 27-29
	"LogicalRewriteCheckpointSync", "LogicalRewriteMappingSync", "LogicalRewriteMappingWrite", // 30-32
	"LogicalRewriteSync", "LogicalRewriteTruncate", "LogicalRewriteWrite", // 33-35
	"RelationMapRead", "RelationMapReplace", "RelationMapWrite", // 36-38
	"ReorderBufferRead", "ReorderBufferWrite", "ReorderLogicalMappingRead", // 39-41
	"ReplicationSlotRead", "ReplicationSlotRestoreSync", "ReplicationSlotSync", // 42-44
	"ReplicationSlotWrite", "SlruFlushSync", "SlruRead", // 45-47
	"SlruSync", "SlruWrite", "SnapbuildRead", // 48-50
	"SnapbuildSync", "SnapbuildWrite", "TimelineHistoryFileSync", // 51-53
	"TimelineHistoryFileWrite", "TimelineHistoryRead", "TimelineHistorySync", // 54-56
	"TimelineHistoryWrite", "TwophaseFileRead", "TwophaseFileSync", // 57-59
	"TwophaseFileWrite", "VersionFileSync", "VersionFileWrite", // 60-62
	"WalsenderTimelineHistoryRead", "WalBootstrapSync", "WalBootstrapWrite", // 63-65
	"WalCopyRead", "WalCopySync", "WalCopyWrite", // 66-68
	"WalInitSync", "WalInitWrite", "WalRead", // 69-71
	"WalSummaryRead", "WalSummaryWrite", "WalSync", // 72-74
	"WalSyncMethodAssign", "WalWrite", // 75-76
}

// IO, 18: the AIO events sort first and shift the rest.
var io18 = []string{
	"AioIoCompletion", "AioIoUringExecution", "AioIoUringSubmit", // 0-2
	"BasebackupRead", "BasebackupSync", "BasebackupWrite", // 3-5
	"BuffileRead", "BuffileTruncate", "BuffileWrite", // 6-8
	"ControlFileRead", "ControlFileSync", "ControlFileSyncUpdate", // 9-11
	"ControlFileWrite", "ControlFileWriteUpdate", "CopyFileCopy", // 12-14
	"CopyFileRead", "CopyFileWrite", "DataFileExtend", // 15-17
	"DataFileFlush", "DataFileImmediateSync", "DataFilePrefetch", // 18-20
	"DataFileRead", "DataFileSync", "DataFileTruncate", // 21-23
	"DataFileWrite", "DsmAllocate", "DsmFillZeroWrite", // 24-26
	"LockFileAddtodatadirRead", "LockFileAddtodatadirSync", "LockFileAddtodatadirWrite", // 27-29
	"LockFileCreateRead", "LockFileCreateSync", "LockFileCreateWrite", // 30-32
	"LockFileRecheckdatadirRead", "LogicalRewriteCheckpointSync", "LogicalRewriteMappingSync", // 33-35
	"LogicalRewriteMappingWrite", "LogicalRewriteSync", "LogicalRewriteTruncate", // 36-38
	"LogicalRewriteWrite", "RelationMapRead", "RelationMapReplace", // 39-41
	"RelationMapWrite", "ReorderBufferRead", "ReorderBufferWrite", // 42-44
	"ReorderLogicalMappingRead", "ReplicationSlotRead", "ReplicationSlotRestoreSync", // 45-47
	"ReplicationSlotSync", "ReplicationSlotWrite", "SlruFlushSync", // 48-50
	"SlruRead", "SlruSync", "SlruWrite", // 51-53
	"SnapbuildRead", "SnapbuildSync", "SnapbuildWrite", // 54-56
	"TimelineHistoryFileSync", "TimelineHistoryFileWrite", "TimelineHistoryRead", // 57-59
	"TimelineHistorySync", "TimelineHistoryWrite", "TwophaseFileRead", // 60-62
	"TwophaseFileSync", "TwophaseFileWrite", "VersionFileSync", // 63-65
	"VersionFileWrite", "WalsenderTimelineHistoryRead", "WalBootstrapSync", // 66-68
	"WalBootstrapWrite", "WalCopyRead", "WalCopySync", // 69-71
	"WalCopyWrite", "WalInitSync", "WalInitWrite", // 72-74
	"WalRead", "WalSummaryRead", "WalSummaryWrite", // 75-77
	"WalSync", "WalSyncMethodAssign", "WalWrite", // 78-80
}

// LWLock, 19: the individual locks (ShmemIndex became the last tranche;
// LogicalDecodingControl and AioWorkerControl are new).
var lwlockIndividual19 = []string{
	"", "", "OidGen", "XidGen", "ProcArray", // 0-4
	"SInvalRead", "SInvalWrite", "WALBufMapping", "WALWrite", "ControlFile", // 5-9
	"", "", "", "MultiXactGen", "", // 10-14
	"", "RelCacheInit", "CheckpointerComm", "TwoPhaseState", "TablespaceCreate", // 15-19
	"BtreeVacuum", "AddinShmemInit", "Autovacuum", "AutovacuumSchedule", "SyncScan", // 20-24
	"RelationMapping", "", "NotifyQueue", "SerializableXactHash", "SerializableFinishedList", // 25-29
	"SerializablePredicateList", "", "SyncRep", "BackgroundWorker", "DynamicSharedMemoryControl", // 30-34
	"AutoFile", "ReplicationSlotAllocation", "ReplicationSlotControl", "", "CommitTs", // 35-39
	"ReplicationOrigin", "MultiXactTruncation", "", "LogicalRepWorker", "XactTruncation", // 40-44
	"", "WrapLimitsVacuum", "NotifyQueueTail", "WaitEventCustom", "WALSummarizer", // 45-49
	"DSMRegistry", "InjectionPoint", "SerialControl", "AioWorkerSubmissionQueue", "WaitLSN", // 50-54
	"LogicalDecodingControl", "", "AioWorkerControl", // 55-57
}

// LWLock, 19: the built-in tranches (BufferContent left for the Buffer
// class; NotifyChannelHash and ShmemIndex are new).
var lwlockTranches19 = []string{
	"XactBuffer", "CommitTsBuffer", "SubtransBuffer", "MultiXactOffsetBuffer", // 58-61
	"MultiXactMemberBuffer", "NotifyBuffer", "NotifyChannelHash", "SerialBuffer", // 62-65
	"WALInsert", "ReplicationOriginState", "ReplicationSlotIO", "LockFastPath", // 66-69
	"BufferMapping", "LockManager", "PredicateLockManager", "ParallelHashJoin", // 70-73
	"ParallelBtreeScan", "ParallelQueryDSA", "PerSessionDSA", "PerSessionRecordType", // 74-77
	"PerSessionRecordTypmod", "SharedTupleStore", "SharedTidBitmap", "ParallelAppend", // 78-81
	"PerXactPredicateList", "PgStatsDSA", "PgStatsHash", "PgStatsData", // 82-85
	"LogicalRepLauncherDSA", "LogicalRepLauncherHash", "DSMRegistryDSA", "DSMRegistryHash", // 86-89
	"CommitTsSLRU", "MultiXactOffsetSLRU", "MultiXactMemberSLRU", "NotifySLRU", // 90-93
	"SerialSLRU", "SubtransSLRU", "XactSLRU", "ParallelVacuumDSA", // 94-97
	"AioUringCompletion", "ShmemIndex", // 98-99
}

// Buffer, 19: BufferPin renamed, with the buffer content locks that were
// LWLock/BufferContent until 18.
var buffer19 = []string{
	"BufferCleanup", "BufferExclusive", "BufferShared", "BufferShareExclusive", // 0-3
}

// IPC, 19.
var ipc19 = []string{
	"AppendReady", "ArchiveCleanupCommand", "ArchiveCommand", "BackendTermination", // 0-3
	"BackupWaitWalArchive", "BgworkerShutdown", "BgworkerStartup", "BtreePage", // 4-7
	"BufferIo", "CheckpointDelayComplete", "CheckpointDelayStart", "CheckpointDone", // 8-11
	"CheckpointStart", "ExecuteGather", "HashBatchAllocate", "HashBatchElect", // 12-15
	"HashBatchLoad", "HashBuildAllocate", "HashBuildElect", "HashBuildHashInner", // 16-19
	"HashBuildHashOuter", "HashGrowBatchesDecide", "HashGrowBatchesElect", "HashGrowBatchesFinish", // 20-23
	"HashGrowBatchesReallocate", "HashGrowBatchesRepartition", "HashGrowBucketsElect", "HashGrowBucketsReallocate", // 24-27
	"HashGrowBucketsReinsert", "LogicalApplySendData", "LogicalParallelApplyStateChange", "LogicalSyncData", // 28-31
	"LogicalSyncStateChange", "MessageQueueInternal", "MessageQueuePutMessage", "MessageQueueReceive", // 32-35
	"MessageQueueSend", "MultixactCreation", "ParallelBitmapScan", "ParallelCreateIndexScan", // 36-39
	"ParallelFinish", "ProcarrayGroupUpdate", "ProcSignalBarrier", "Promote", // 40-43
	"RecoveryConflictSnapshot", "RecoveryConflictTablespace", "RecoveryEndCommand", "RecoveryPause", // 44-47
	"RepackWorkerExport", "ReplicationOriginDrop", "ReplicationSlotDrop", "RestoreCommand", // 48-51
	"SafeSnapshot", "SyncRep", "WaitForWalFlush", "WaitForWalReplay", // 52-55
	"WaitForWalWrite", "WalReceiverExit", "WalReceiverUpstreamCatchup", "WalReceiverWaitStart", // 56-59
	"WalSummaryReady", "XactGroupUpdate", // 60-61
}

// Timeout, 19 (CommitDelay is new).
var timeout19 = []string{
	"BaseBackupThrottle", "CheckpointWriteDelay", "CommitDelay", "PgSleep", // 0-3
	"RecoveryApplyDelay", "RecoveryRetrieveRetryInterval", "RegisterSyncRequest", "SpinDelay", // 4-7
	"VacuumDelay", "VacuumTruncate", "WalSummarizerError", // 8-10
}

// IO, 19.
var io19 = []string{
	"AioIoCompletion", "AioIoUringExecution", "AioIoUringSubmit", "BasebackupRead", // 0-3
	"BasebackupSync", "BasebackupWrite", "BuffileRead", "BuffileTruncate", // 4-7
	"BuffileWrite", "ControlFileRead", "ControlFileSync", "ControlFileSyncUpdate", // 8-11
	"ControlFileWrite", "ControlFileWriteUpdate", "CopyFileCopy", "CopyFileRead", // 12-15
	"CopyFileWrite", "CopyFromRead", "CopyToWrite", "DataFileExtend", // 16-19
	"DataFileFlush", "DataFileImmediateSync", "DataFilePrefetch", "DataFileRead", // 20-23
	"DataFileSync", "DataFileTruncate", "DataFileWrite", "DsmAllocate", // 24-27
	"DsmFillZeroWrite", "LockFileAddtodatadirRead", "LockFileAddtodatadirSync", "LockFileAddtodatadirWrite", // 28-31
	"LockFileCreateRead", "LockFileCreateSync", "LockFileCreateWrite", "LockFileRecheckdatadirRead", // 32-35
	"LogicalRewriteCheckpointSync", "LogicalRewriteMappingSync", "LogicalRewriteMappingWrite", "LogicalRewriteSync", // 36-39
	"LogicalRewriteTruncate", "LogicalRewriteWrite", "RelationMapRead", "RelationMapReplace", // 40-43
	"RelationMapWrite", "ReorderBufferRead", "ReorderBufferWrite", "ReorderLogicalMappingRead", // 44-47
	"ReplicationSlotRead", "ReplicationSlotRestoreSync", "ReplicationSlotSync", "ReplicationSlotWrite", // 48-51
	"SlruFlushSync", "SlruRead", "SlruSync", "SlruWrite", // 52-55
	"SnapbuildRead", "SnapbuildSync", "SnapbuildWrite", "TimelineHistoryFileSync", // 56-59
	"TimelineHistoryFileWrite", "TimelineHistoryRead", "TimelineHistorySync", "TimelineHistoryWrite", // 60-63
	"TwophaseFileRead", "TwophaseFileSync", "TwophaseFileWrite", "VersionFileSync", // 64-67
	"VersionFileWrite", "WalsenderTimelineHistoryRead", "WalBootstrapSync", "WalBootstrapWrite", // 68-71
	"WalCopyRead", "WalCopySync", "WalCopyWrite", "WalInitSync", // 72-75
	"WalInitWrite", "WalRead", "WalSummaryRead", "WalSummaryWrite", // 76-79
	"WalSync", "WalSyncMethodAssign", "WalWrite", // 80-82
}
