
$0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d°ê*$5d3c2b1a-0f9e-4d8c-b7a6-958473625140R|
$11111111-2222-4333-8444-555555555555alpine/bin/sh-c
sleep 3600"
PATH/usr/bin:/bin"
_LANG
C.UTF-8 Ã©(ô0€€€€