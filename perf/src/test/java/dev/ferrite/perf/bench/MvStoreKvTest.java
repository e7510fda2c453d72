package dev.ferrite.perf.bench;

class MvStoreKvTest extends DurableKvContract {
    @Override
    KvTarget target() {
        return KvTarget.MVSTORE;
    }
}
