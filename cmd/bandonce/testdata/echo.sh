#!/bin/sh
# A complete Band agent for bandonce run: the message's body comes on
# stdin, the reply goes to stdout.
printf 'echo: '; cat
