//  c_tower SUB PUB  (a driver bench/c_reference.py names; built by bench/c/build.sh)
//  Runs dafka_tower_actor with its XSUB bound at SUB and its XPUB at PUB until SIGTERM.
#include <dafka.h>

int main (int argc, char *argv []) {
    if (argc != 3) { fprintf (stderr, "usage: c_tower SUB PUB\n"); return 2; }
    zsys_set_sndhwm (1000000);
    zsys_set_rcvhwm (1000000);
    zsys_set_linger (0);
    zconfig_t *config = zconfig_new ("root", NULL);
    zconfig_put (config, "tower/sub_address", argv [1]);
    zconfig_put (config, "tower/pub_address", argv [2]);
    zactor_t *tower = zactor_new (dafka_tower_actor, config);
    assert (tower);
    char *command = zstr_recv (tower);  //  returns when SIGTERM/SIGINT interrupts CZMQ
    zstr_free (&command);
    zactor_destroy (&tower);
    zconfig_destroy (&config);
    return 0;
}
