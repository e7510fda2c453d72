package dev.ferrite.perf.bench;

class XodusKvTest extends DurableKvContract {
    @Override
    KvTarget target() {
        return KvTarget.XODUS;
    }
}
