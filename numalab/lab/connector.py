"""The `@kvm` pyinfra connector: bring a lab guest up on connect, then talk to it over SSH.

Like pyinfra's `@dockerssh`, it wraps an SSHConnector and delegates every command and file transfer
to it; what it adds is `connect()`: make sure the lab's network, base image, the guest's overlay,
seed and domain exist, start the domain and wait for SSH. Host data comes from an inventory built
by `numalab.lab.inventory` (inventories/kvm.py); `pyinfra @kvm/worker-1 ...` without an inventory
looks the guest up in inventories/kvm.py (or $NUMALAB_INVENTORY).

    pyinfra inventories/kvm.py deploys/cluster.py
    pyinfra @kvm/worker-1 exec -- numactl --hardware
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyinfra import logger
from pyinfra.api.exceptions import ConnectError, InventoryError
from pyinfra.connectors.base import BaseConnector, DataMeta
from pyinfra.connectors.ssh import SSHConnector
from typing_extensions import TypedDict, Unpack, override

from numalab.lab.errors import LabError
from numalab.lab.inventory import default_inventory_host_data
from numalab.lab.provisioning import lab_host
from numalab.lab.readiness import DEFAULT_SSH_TIMEOUT
from numalab.lab.spec import lab_from_dict
from numalab.model.errors import ValidationError

if TYPE_CHECKING:
    from pyinfra.api.arguments import ConnectorArguments
    from pyinfra.api.host import Host
    from pyinfra.api.state import State


class KvmConnectorData(TypedDict):
    kvm_lab: dict
    kvm_guest: str
    kvm_ssh_timeout: float


connector_data_meta: dict[str, DataMeta] = {
    "kvm_lab": DataMeta("The whole lab (settings and guests) as numalab.lab.spec.Lab.to_dict() gives it"),
    "kvm_guest": DataMeta("Name of this guest in the lab"),
    "kvm_ssh_timeout": DataMeta("Seconds to wait for the guest's SSH after starting it", DEFAULT_SSH_TIMEOUT),
}


class KvmConnector(BaseConnector):
    """Start a NUMA-shaped libvirt guest of the numa-lab KVM lab and run commands on it over SSH."""

    handles_execution = True

    data_cls = KvmConnectorData
    data_meta = connector_data_meta
    data: KvmConnectorData

    ssh: SSHConnector

    def __init__(self, state: State, host: Host) -> None:
        super().__init__(state, host)
        self.ssh = SSHConnector(state, host)

    @override
    @staticmethod
    def make_names_data(name: str | None = None) -> Any:
        if not name:
            raise InventoryError("No lab guest given: use @kvm/<guest>, e.g. @kvm/worker-1")
        yield f"@kvm/{name}", default_inventory_host_data(name), ["@kvm"]

    @override
    def connect(self) -> None:
        if not self.data["kvm_lab"]:
            raise ConnectError(
                f"no lab data for guest {self.data['kvm_guest']!r}: it is in no inventory built by "
                "numalab.lab.inventory (see inventories/kvm.py)"
            )
        try:
            lab = lab_from_dict(self.data["kvm_lab"])
            guest = lab.guest(self.data["kvm_guest"])
            host = lab_host(lab)
            host.ensure_guest(guest)
            waited = host.wait_for_ssh(guest, float(self.data["kvm_ssh_timeout"]))
        except (ValidationError, LabError, KeyError) as exc:
            raise ConnectError(str(exc)) from None
        logger.debug("%s: SSH ready after %.1f s", guest.name, waited)
        self.ssh.connect()

    @override
    def disconnect(self) -> None:
        self.ssh.disconnect()

    @override
    def run_shell_command(
        self,
        command: Any,
        print_output: bool = False,
        print_input: bool = False,
        **arguments: Unpack[ConnectorArguments],
    ) -> Any:
        return self.ssh.run_shell_command(command, print_output=print_output, print_input=print_input, **arguments)

    @override
    def put_file(
        self,
        filename_or_io: Any,
        remote_filename: str,
        remote_temp_filename: str | None = None,
        print_output: bool = False,
        print_input: bool = False,
        **arguments: Unpack[ConnectorArguments],
    ) -> bool:
        return self.ssh.put_file(
            filename_or_io,
            remote_filename,
            remote_temp_filename=remote_temp_filename,
            print_output=print_output,
            print_input=print_input,
            **arguments,
        )

    @override
    def get_file(
        self,
        remote_filename: str,
        filename_or_io: Any,
        remote_temp_filename: str | None = None,
        print_output: bool = False,
        print_input: bool = False,
        **arguments: Unpack[ConnectorArguments],
    ) -> bool:
        return self.ssh.get_file(
            remote_filename,
            filename_or_io,
            remote_temp_filename=remote_temp_filename,
            print_output=print_output,
            print_input=print_input,
            **arguments,
        )

    @override
    def check_can_rsync(self) -> None:
        self.ssh.check_can_rsync()

    @override
    def rsync(
        self,
        src: str,
        dest: str,
        flags: Any,
        print_output: bool = False,
        print_input: bool = False,
        **arguments: Unpack[ConnectorArguments],
    ) -> bool:
        return self.ssh.rsync(src, dest, flags, print_output=print_output, print_input=print_input, **arguments)
