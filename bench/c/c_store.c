//  c_store DB SUB PUB  (a driver bench/c_reference.py names; built by bench/c/build.sh)
//  Runs dafka_store_actor (its writer and reader) on the leveldb database DB, beaconing
//  through the tower at SUB/PUB and advertising 127.0.0.1, until SIGTERM.
#include <dafka.h>

int main (int argc, char *argv []) {
    if (argc != 4) { fprintf (stderr, "usage: c_store DB SUB PUB\n"); return 2; }
    zsys_set_sndhwm (1000000);
    zsys_set_rcvhwm (1000000);
    zsys_set_linger (0);
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "store/db", argv [1]);
    zconfig_put (config, "beacon/sub_address", argv [2]);
    zconfig_put (config, "beacon/pub_address", argv [3]);
    zconfig_put (config, "beacon/address", "127.0.0.1");
    zactor_t *store = zactor_new (dafka_store_actor, config);
    assert (store);
    char *command = zstr_recv (store);  //  returns when SIGTERM/SIGINT interrupts CZMQ
    zstr_free (&command);
    zactor_destroy (&store);
    zconfig_destroy (&config);
    return 0;
}
