# Loads a Vagrantfile with a recording stand-in for Vagrant's config object
# and prints, as JSON, each machine's hostname, private network address and
# provisioners (name, type, and their options), without a provider, a box or
# any build: the trigger's ruby block is recorded, never called.
#
#   ruby vagrantfile_provisions.rb PATH/Vagrantfile
require "json"

# Recorder answers every config call; blocks given to define/provider/
# configure are run with a child recorder, as Vagrant does.
class Recorder
  attr_reader :calls

  def initialize
    @calls = []
  end

  def method_missing(name, *args, **kw, &blk)
    n = name.to_s
    return @calls << [n.chomp("="), args[0]] && args[0] if n.end_with?("=")
    child = Recorder.new
    @calls << [n, args, kw, child]
    blk.call(child) if blk && %w[define provider].include?(n)
    child
  end

  def respond_to_missing?(*)
    true
  end
end

module Vagrant
  module Errors
    class VagrantError < StandardError
      def initialize(*)
        super(error_message)
      end
    end
  end

  @config = Recorder.new
  class << self
    attr_reader :config

    def configure(_version)
      yield @config
    end
  end
end

load ARGV.fetch(0)

machines = {}
Vagrant.config.calls.select { |call| call[0] == "vm" }.flat_map { |call| call[3].calls }.each do |c|
  begin
    next unless c[0] == "define"
    node = c[3]
    # Each node.vm is a fresh recorder: read them all, in order.
    vm_calls = node.calls.select { |x| x[0] == "vm" }.flat_map { |x| x[3].calls }
    m = { "provisions" => [] }
    vm_calls.each do |x|
      case x[0]
      when "hostname" then m["hostname"] = x[1]
      when "network" then m["ip"] = x[2][:ip]
      when "provision"
        m["provisions"] << { "name" => x[1][0], "type" => x[2][:type], "source" => x[2][:source],
                             "destination" => x[2][:destination], "inline" => x[2][:inline],
                             "args" => x[2][:args] }
      end
    end
    machines[c[1][0]] = m
  end
end
puts JSON.generate(machines)
